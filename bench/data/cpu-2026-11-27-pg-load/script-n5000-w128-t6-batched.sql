\set sid 1
\if :j = 0
\if :first = 1
\set delay random(0, 6000000)
\sleep :delay us
\set first 0
\endif
\if random(1, 1000000) <= 1000000
BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;
SELECT 1 FROM studies WHERE study_id = :sid;
SELECT CURRENT_TIMESTAMP;
SELECT t.trial_id, h.heartbeat FROM trials t JOIN trial_heartbeats h ON h.trial_id = t.trial_id WHERE t.study_id = :sid AND t.state = 'RUNNING';
COMMIT;
\endif
BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;
SELECT state, COUNT(*) FROM trials WHERE study_id = :sid GROUP BY state;
COMMIT;
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT 1 FROM studies WHERE study_id = :sid FOR UPDATE;
SELECT state, COUNT(*) FROM trials WHERE study_id = :sid GROUP BY state;
INSERT INTO trials (trial_id, number, study_id, state, datetime_start, datetime_complete) VALUES (nextval('trials_trial_id_seq'), currval('trials_trial_id_seq') - 1, :sid, 'RUNNING', LOCALTIMESTAMP, NULL) RETURNING trial_id AS tid \gset
SELECT CURRENT_TIMESTAMP;
INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (:tid, LOCALTIMESTAMP) ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat;
COMMIT;
\set hprev :tid - 1
\set hcur :tid
\set minid :hprev - 255
\set firstnum :hprev - 0
BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;
\set lo :hprev - 127
\set hi :hprev + 12
SELECT trial_id, number, study_id, state, datetime_start, datetime_complete FROM trials WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hprev::integer)));
SELECT trial_id, number, study_id, state, datetime_start, datetime_complete FROM trials WHERE study_id = :sid AND trial_id > :hprev AND number >= :firstnum ORDER BY trial_id;
SELECT trial_id, param_name, param_value, distribution_json FROM trial_params WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
SELECT trial_id, objective, value, value_type FROM trial_values WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
SELECT trial_id, step, intermediate_value, intermediate_value_type FROM trial_intermediate_values WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
SELECT trial_id, "key", value_json FROM trial_user_attributes WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
SELECT trial_id, "key", value_json FROM trial_system_attributes WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
COMMIT;
\set hprev :hcur
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_system_attributes (trial_id, "key", value_json) VALUES (:tid, 'tpe' || chr(58) || 'relative_params' || chr(58) || '0', '"{\"classifier_layers\": 1, \"dropout\": 0.1, \"learning_rate\": 3e-05, \"model\": \"roberta-base\", \"warmup_ratio\": 0.1, \"weight_decay\": 0.01}"') ON CONFLICT (trial_id, "key") DO UPDATE SET value_json = excluded.value_json;
COMMIT;
\set pv random(0, 7)
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (:tid, 'model', :pv, '{"name": "CategoricalDistribution", "attributes": {"choices": ["bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large", "microsoft/deberta-v3-base", "microsoft/deberta-v3-large", "xlm-roberta-base"]}}') ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;
COMMIT;
\set pv random(0, 1000000) * 0.0000001
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (:tid, 'learning_rate', :pv, '{"name": "FloatDistribution", "attributes": {"step": null, "low": 5e-06, "high": 0.0001, "log": true}}') ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;
COMMIT;
\set pv random(0, 1000000) * 0.0000001
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (:tid, 'weight_decay', :pv, '{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 0.1, "log": false}}') ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;
COMMIT;
\set pv random(0, 1000000) * 0.0000001
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (:tid, 'warmup_ratio', :pv, '{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 0.2, "log": false}}') ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;
COMMIT;
\set pv random(0, 1000000) * 0.0000001
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (:tid, 'dropout', :pv, '{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 0.3, "log": false}}') ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;
COMMIT;
\set pv random(0, 3)
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (:tid, 'classifier_layers', :pv, '{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 0, "high": 3}}') ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;
COMMIT;
\set pv random(0, 6)
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (:tid, 'batch_size', :pv, '{"name": "CategoricalDistribution", "attributes": {"choices": [8, 12, 16, 24, 32, 48, 64]}}') ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;
COMMIT;
\set pv random(0, 5)
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (:tid, 'grad_accum', :pv, '{"name": "CategoricalDistribution", "attributes": {"choices": [1, 2, 3, 4, 6, 8]}}') ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;
COMMIT;
\set pv random(0, 512)
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (:tid, 'max_length', :pv, '{"name": "IntDistribution", "attributes": {"log": false, "step": 32, "low": 128, "high": 512}}') ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;
COMMIT;
\else
\sleep 600000 us
\if :j = 10
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
SELECT CURRENT_TIMESTAMP;
INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (:tid, LOCALTIMESTAMP) ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat;
COMMIT;
\endif
\set step :j - 1
\set v random(0, 1000000) * 0.000001
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) VALUES (:tid, :step, :v, 'FINITE') ON CONFLICT (trial_id, step) DO UPDATE SET intermediate_value = excluded.intermediate_value, intermediate_value_type = excluded.intermediate_value_type;
COMMIT;
\set hcur :tid + (128 * :j) / 11
\set minid :hprev - 255
\set firstnum :hprev - 0
BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;
\set lo :hprev - 127
\set hi :hprev + 12
SELECT trial_id, number, study_id, state, datetime_start, datetime_complete FROM trials WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hprev::integer)));
SELECT trial_id, number, study_id, state, datetime_start, datetime_complete FROM trials WHERE study_id = :sid AND trial_id > :hprev AND number >= :firstnum ORDER BY trial_id;
SELECT trial_id, param_name, param_value, distribution_json FROM trial_params WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
SELECT trial_id, objective, value, value_type FROM trial_values WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
SELECT trial_id, step, intermediate_value, intermediate_value_type FROM trial_intermediate_values WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
SELECT trial_id, "key", value_json FROM trial_user_attributes WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
SELECT trial_id, "key", value_json FROM trial_system_attributes WHERE trial_id = ANY(ARRAY(SELECT generate_series(:lo::integer, :hi::integer)));
COMMIT;
\set hprev :hcur
\endif
\if :j = 10
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;
UPDATE trials SET state = 'COMPLETE', datetime_complete = LOCALTIMESTAMP WHERE trial_id = :tid;
DELETE FROM trial_values WHERE trial_id = :tid;
INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (:tid, 0, :v, 'FINITE');
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;
SELECT trial_id, number, study_id, state, datetime_start, datetime_complete FROM trials WHERE trial_id = :tid;
SELECT trial_id, param_name, param_value, distribution_json FROM trial_params WHERE trial_id = :tid;
SELECT trial_id, objective, value, value_type FROM trial_values WHERE trial_id = :tid;
SELECT trial_id, step, intermediate_value, intermediate_value_type FROM trial_intermediate_values WHERE trial_id = :tid;
SELECT trial_id, "key", value_json FROM trial_user_attributes WHERE trial_id = :tid;
SELECT trial_id, "key", value_json FROM trial_system_attributes WHERE trial_id = :tid;
COMMIT;
\set j 0
\else
\set j :j + 1
\endif
