-- A study written by Optuna 3.1.0 (Debian 12's python3-optuna, SQLAlchemy 1.4.46): 'sqlite3 x.db .dump'
-- of optuna.create_study(direction='maximize') + optimize (COMPLETE, PRUNED with inf/nan reports,
-- FAIL), ask() left RUNNING and enqueue_trial() left WAITING. Read by tests/storages/sqlite_test.cpp.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE studies (
	study_id INTEGER NOT NULL, 
	study_name VARCHAR(512) NOT NULL, 
	PRIMARY KEY (study_id)
);
INSERT INTO studies VALUES(1,'optuna31');
CREATE TABLE version_info (
	version_info_id INTEGER NOT NULL, 
	schema_version INTEGER, 
	library_version VARCHAR(256), 
	PRIMARY KEY (version_info_id), 
	CHECK (version_info_id=1)
);
INSERT INTO version_info VALUES(1,12,'3.1.0');
CREATE TABLE study_directions (
	study_direction_id INTEGER NOT NULL, 
	direction VARCHAR(8) NOT NULL, 
	study_id INTEGER NOT NULL, 
	objective INTEGER NOT NULL, 
	PRIMARY KEY (study_direction_id), 
	UNIQUE (study_id, objective), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
INSERT INTO study_directions VALUES(1,'MAXIMIZE',1,0);
CREATE TABLE study_user_attributes (
	study_user_attribute_id INTEGER NOT NULL, 
	study_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (study_user_attribute_id), 
	UNIQUE (study_id, "key"), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
INSERT INTO study_user_attributes VALUES(1,1,'owner','"optuna"');
CREATE TABLE study_system_attributes (
	study_system_attribute_id INTEGER NOT NULL, 
	study_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (study_system_attribute_id), 
	UNIQUE (study_id, "key"), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
CREATE TABLE trials (
	trial_id INTEGER NOT NULL, 
	number INTEGER, 
	study_id INTEGER, 
	state VARCHAR(8) NOT NULL, 
	datetime_start DATETIME, 
	datetime_complete DATETIME, 
	PRIMARY KEY (trial_id), 
	FOREIGN KEY(study_id) REFERENCES studies (study_id)
);
INSERT INTO trials VALUES(1,0,1,'COMPLETE','2026-11-21 21:10:27.662041','2026-11-21 21:10:27.777041');
INSERT INTO trials VALUES(2,1,1,'PRUNED','2026-11-21 21:10:27.803561','2026-11-21 21:10:27.858038');
INSERT INTO trials VALUES(3,2,1,'FAIL','2026-11-21 21:10:27.871265','2026-11-21 21:10:27.906528');
INSERT INTO trials VALUES(4,3,1,'COMPLETE','2026-11-21 21:10:27.918152','2026-11-21 21:10:27.959053');
INSERT INTO trials VALUES(5,4,1,'RUNNING','2026-11-21 21:10:27.971288',NULL);
INSERT INTO trials VALUES(6,5,1,'WAITING',NULL,NULL);
CREATE TABLE trial_user_attributes (
	trial_user_attribute_id INTEGER NOT NULL, 
	trial_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (trial_user_attribute_id), 
	UNIQUE (trial_id, "key"), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO trial_user_attributes VALUES(1,1,'note','{"n": 0, "vals": [1.5, null]}');
INSERT INTO trial_user_attributes VALUES(2,2,'note','{"n": 1, "vals": [1.5, null]}');
INSERT INTO trial_user_attributes VALUES(3,3,'note','{"n": 2, "vals": [1.5, null]}');
INSERT INTO trial_user_attributes VALUES(4,4,'note','{"n": 3, "vals": [1.5, null]}');
CREATE TABLE trial_system_attributes (
	trial_system_attribute_id INTEGER NOT NULL, 
	trial_id INTEGER, 
	"key" VARCHAR(512), 
	value_json TEXT, 
	PRIMARY KEY (trial_system_attribute_id), 
	UNIQUE (trial_id, "key"), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO trial_system_attributes VALUES(1,6,'fixed_params','{"lr": 0.001, "layers": 2, "opt": "sgd"}');
CREATE TABLE trial_params (
	param_id INTEGER NOT NULL, 
	trial_id INTEGER, 
	param_name VARCHAR(512), 
	param_value FLOAT, 
	distribution_json TEXT, 
	PRIMARY KEY (param_id), 
	UNIQUE (trial_id, param_name), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO trial_params VALUES(1,1,'lr',0.0015965834028940294967,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 1e-05, "high": 0.1, "log": true}}');
INSERT INTO trial_params VALUES(2,1,'layers',3.0,'{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 4}}');
INSERT INTO trial_params VALUES(3,1,'opt',2.0,'{"name": "CategoricalDistribution", "attributes": {"choices": ["adam", "sgd", null]}}');
INSERT INTO trial_params VALUES(4,2,'lr',0.038474444287036155265,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 1e-05, "high": 0.1, "log": true}}');
INSERT INTO trial_params VALUES(5,2,'layers',1.0,'{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 4}}');
INSERT INTO trial_params VALUES(6,2,'opt',2.0,'{"name": "CategoricalDistribution", "attributes": {"choices": ["adam", "sgd", null]}}');
INSERT INTO trial_params VALUES(7,3,'lr',1.3167545978819976442e-05,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 1e-05, "high": 0.1, "log": true}}');
INSERT INTO trial_params VALUES(8,3,'layers',2.0,'{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 4}}');
INSERT INTO trial_params VALUES(9,3,'opt',2.0,'{"name": "CategoricalDistribution", "attributes": {"choices": ["adam", "sgd", null]}}');
INSERT INTO trial_params VALUES(10,4,'lr',0.0023091453450156426523,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 1e-05, "high": 0.1, "log": true}}');
INSERT INTO trial_params VALUES(11,4,'layers',1.0,'{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 4}}');
INSERT INTO trial_params VALUES(12,4,'opt',0.0,'{"name": "CategoricalDistribution", "attributes": {"choices": ["adam", "sgd", null]}}');
INSERT INTO trial_params VALUES(13,5,'lr',0.00013617592283802470976,'{"name": "FloatDistribution", "attributes": {"step": null, "low": 1e-05, "high": 0.1, "log": true}}');
CREATE TABLE trial_values (
	trial_value_id INTEGER NOT NULL, 
	trial_id INTEGER NOT NULL, 
	objective INTEGER NOT NULL, 
	value FLOAT, 
	value_type VARCHAR(7) NOT NULL, 
	PRIMARY KEY (trial_value_id), 
	UNIQUE (trial_id, objective), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO trial_values VALUES(1,1,0,3.0015965834028941472,'FINITE');
INSERT INTO trial_values VALUES(2,2,0,0.25,'FINITE');
INSERT INTO trial_values VALUES(3,4,0,1.0023091453450156951,'FINITE');
CREATE TABLE trial_intermediate_values (
	trial_intermediate_value_id INTEGER NOT NULL, 
	trial_id INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	intermediate_value FLOAT, 
	intermediate_value_type VARCHAR(7) NOT NULL, 
	PRIMARY KEY (trial_intermediate_value_id), 
	UNIQUE (trial_id, step), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
INSERT INTO trial_intermediate_values VALUES(1,1,0,0.5,'FINITE');
INSERT INTO trial_intermediate_values VALUES(2,2,0,NULL,'INF_POS');
INSERT INTO trial_intermediate_values VALUES(3,2,1,NULL,'NAN');
INSERT INTO trial_intermediate_values VALUES(4,2,2,0.25,'FINITE');
INSERT INTO trial_intermediate_values VALUES(5,4,0,0.5,'FINITE');
CREATE TABLE trial_heartbeats (
	trial_heartbeat_id INTEGER NOT NULL, 
	trial_id INTEGER NOT NULL, 
	heartbeat DATETIME NOT NULL, 
	PRIMARY KEY (trial_heartbeat_id), 
	UNIQUE (trial_id), 
	FOREIGN KEY(trial_id) REFERENCES trials (trial_id)
);
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO alembic_version VALUES('v3.0.0.d');
CREATE UNIQUE INDEX ix_studies_study_name ON studies (study_name);
COMMIT;
