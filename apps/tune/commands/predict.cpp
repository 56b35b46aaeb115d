// `tune predict --model DIR --data FILE [--output FILE] [--format jsonl|csv]`: labels text with a
// model saved by --save-best (or any checkpoint directory with a classifier head), and prints the
// metric when the data has labels.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>

#include "app.h"
#include "commands.h"
#include "torch_loader.h"
#include "train/metrics.h"
#include "train/save_best.h"
#include "train/text_data.h"
#include "train/train_metric.h"
#include "train_objective/train_objective.h"
#include "util/nonfinite.h"

namespace tune::app {
namespace {

struct PredictArgs {
  std::string model;
  std::string data;
  std::string output;  // empty: stdout
  std::string format = "jsonl";
  std::string data_format = "auto";
  std::string text_column;       // empty: the saved model's (its training data's), else "text"
  std::string text_pair_column;  // empty: the saved model's (pairs), else none
  std::string label_column;      // empty: the saved model's (its training data's), else "label"
  std::string device = "cpu";
  int64_t threads = 0;
  int64_t batch_size = 0;  // 0: the saved trial's
};

// The texts tokenized by the model's tokenizer as the train objective tokenizes validation
// texts, with their targets (when every row has one: `labelled`) in data.validation_*; `texts`
// keeps the raw text, `lines` each text's line in the file.
// NotFound/InvalidArgument naming file and line.
Status LoadPredictData(const PredictArgs& args, const SavedModel& model, TextTrainData& data,
                       std::vector<std::string>& texts, std::vector<std::string>& pairs,
                       std::vector<int64_t>& lines, bool& labelled) {
  TUNE_ASSIGN_OR_RETURN(DataTable table, ReadDataTable(args.data, args.data_format));
  TUNE_ASSIGN_OR_RETURN(Tokenizer tokenizer,
                        Tokenizer::FromCheckpointDir(model.checkpoint.dir, TokenizerOptions{}));
  const std::string text_column =
      args.text_column.empty() ? model.inputs.text_column : args.text_column;
  const std::string pair_column = args.text_pair_column.empty()
                                      ? model.inputs.text_pair_column.value_or("")
                                      : args.text_pair_column;
  TextDataOptions options;  // how the label column is read: as the model was trained
  options.problem_type = model.inputs.problem_type;
  options.label_column = args.label_column.empty() ? model.inputs.label_column : args.label_column;
  options.label_separator = model.inputs.label_separator;
  TextDataset dataset;
  dataset.problem_type = model.inputs.problem_type;
  if (dataset.problem_type != ProblemType::kRegression) dataset.labels = model.labels;
  if (!pair_column.empty()) dataset.pair_truncation = model.inputs.truncation;
  labelled = !table.rows.empty();
  auto text_at = [&](const DataRow& row, const std::string& column) -> Result<std::string> {
    const Json& text = row.fields.value(column, Json());
    if (!text.is_string()) {
      return InvalidArgumentError(
          fmt::format("{}:{}: no text column '{}'{}", args.data, row.line, column,
                      pair_column.empty() ? "" : " (the model takes pairs)"));
    }
    if (!pair_column.empty() && text.get_ref<const std::string&>().empty()) {
      return InvalidArgumentError(
          fmt::format("{}:{}: '{}' is empty: each example of a pair "
                      "('{}', '{}') needs both texts",
                      args.data, row.line, column, text_column, pair_column));
    }
    return text.get<std::string>();
  };
  for (const DataRow& row : table.rows) {
    TUNE_ASSIGN_OR_RETURN(std::string text, text_at(row, text_column));
    texts.push_back(std::move(text));
    lines.push_back(static_cast<int64_t>(row.line));
    std::string pair;
    if (!pair_column.empty()) {
      TUNE_ASSIGN_OR_RETURN(pair, text_at(row, pair_column));
      pairs.push_back(pair);
    }
    TextExample example{texts.back(), 0, std::move(pair)};
    if (!row.fields.contains(options.label_column) || row.fields[options.label_column].is_null()) {
      labelled = false;
    } else if (labelled) {
      TUNE_RETURN_IF_ERROR(ReadExampleTarget(table, row, options, model.labels, example));
    }
    dataset.validation.push_back(std::move(example));
  }
  data = TokenizeTextDataset(dataset, tokenizer, MaxSequenceLength(model.checkpoint.model));
  return Status::Ok();
}

std::vector<double> Softmax(const std::vector<float>& logits) {
  double top = -INFINITY, sum = 0;
  for (float v : logits) top = std::max(top, static_cast<double>(v));
  std::vector<double> p;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - top);
  for (float v : logits) p.push_back(std::exp(static_cast<double>(v) - top) / sum);
  return p;
}

std::string CsvField(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::vector<double> Sigmoid(const std::vector<float>& logits) {
  std::vector<double> p;
  for (float v : logits) p.push_back(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
  return p;
}

// What the model outputs for one text: each label's probability (softmax; multi-label: a
// sigmoid per label), or the regression's value.
std::vector<double> Outputs(const SavedModel& model, const std::vector<float>& logits) {
  switch (model.inputs.problem_type) {
    case ProblemType::kSingleLabel:
      return Softmax(logits);
    case ProblemType::kMultiLabel:
      return Sigmoid(logits);
    case ProblemType::kRegression:
      return {logits.empty() ? 0.0 : static_cast<double>(logits[0])};
  }
  return {};
}

// The labels a multi-label model predicts: those at probability >= its threshold.
std::vector<std::string> PredictedLabels(const SavedModel& model, const std::vector<double>& p) {
  std::vector<std::string> out;
  for (size_t k = 0; k < p.size(); ++k) {
    if (p[k] >= model.hp.threshold) out.push_back(model.labels[k]);
  }
  return out;
}

// The line of a text whose logits are not finite: no prediction.
void WriteNonFinitePrediction(const PredictArgs& args, const SavedModel& model,
                              const std::string& text, const std::string* pair, const char* target,
                              std::ostream& out) {
  const bool regression = model.inputs.problem_type == ProblemType::kRegression;
  if (args.format == "csv") {
    out << CsvField(text) << "," << (pair == nullptr ? "" : CsvField(*pair) + ",");
    if (!regression) out << std::string(model.labels.size(), ',');
    out << "\n";
    return;
  }
  Json line = {{"text", text}};
  if (pair != nullptr) line["text_pair"] = *pair;
  line[target] = nullptr;
  if (!regression) line["probabilities"] = nullptr;
  line["logits"] = nullptr;
  line["nonfinite"] = true;
  out << line.dump() << "\n";
}

// One line per text: the predicted label and each label's probability; multi-label, the
// predicted labels (a list; CSV: joined by the label separator) and each label's probability;
// regression, the predicted "score". A text whose logits are not all finite gets no prediction:
// its target, probabilities and logits are null ("nonfinite": true; CSV: empty fields).
void WritePredictions(const PredictArgs& args, const SavedModel& model,
                      const std::vector<std::string>& texts, const std::vector<std::string>& pairs,
                      const std::vector<std::vector<float>>& logits, std::ostream& out) {
  const ProblemType type = model.inputs.problem_type;
  const char* target = type == ProblemType::kRegression   ? "score"
                       : type == ProblemType::kMultiLabel ? "labels"
                                                          : "label";
  if (args.format == "csv") {
    out << (pairs.empty() ? "text," : "text,text_pair,") << target;
    if (type != ProblemType::kRegression) {
      for (const auto& l : model.labels) out << "," << CsvField("p_" + l);
    }
    out << "\n";
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!AllFinite(logits[i])) {
      WriteNonFinitePrediction(args, model, texts[i], pairs.empty() ? nullptr : &pairs[i], target,
                               out);
      continue;
    }
    const std::vector<double> p = Outputs(model, logits[i]);
    Json value;
    std::string shown;
    if (type == ProblemType::kRegression) {
      value = p[0];
      shown = fmt::format("{:.6g}", p[0]);
    } else if (type == ProblemType::kMultiLabel) {
      const std::vector<std::string> labels = PredictedLabels(model, p);
      value = labels;
      shown = CsvField(JoinNames(labels, model.inputs.label_separator));
    } else {
      const auto best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
      value = model.labels[best];
      shown = CsvField(model.labels[best]);
    }
    if (args.format == "csv") {
      out << CsvField(texts[i]) << "," << (pairs.empty() ? "" : CsvField(pairs[i]) + ",") << shown;
      if (type != ProblemType::kRegression) {
        for (double v : p) out << "," << fmt::format("{:.6f}", v);
      }
      out << "\n";
      continue;
    }
    Json line = {{"text", texts[i]}};
    if (!pairs.empty()) line["text_pair"] = pairs[i];
    line[target] = value;
    if (type != ProblemType::kRegression) {
      Json probs = Json::object();
      for (size_t k = 0; k < p.size(); ++k) probs[model.labels[k]] = p[k];
      line["probabilities"] = probs;
    }
    line["logits"] = logits[i];
    out << line.dump() << "\n";
  }
}

// Every metric over labelled data, as the trainer's evaluation computes them (its validation
// loss: cross-entropy, binary cross-entropy averaged over labels, squared error; without the
// class weights); "f1" of the saved positive label (two labels).
Json PredictMetrics(const TextTrainData& data, const SavedModel& model,
                    const std::vector<std::vector<float>>& logits) {
  const ProblemType type = model.inputs.problem_type;
  double loss = 0;
  const auto n = logits.size();
  const auto k = static_cast<size_t>(data.num_labels);
  std::vector<float> outputs;
  std::vector<int64_t> predictions;
  for (size_t i = 0; i < n; ++i) {
    const std::vector<double> p = Outputs(model, logits[i]);
    for (double v : p) outputs.push_back(static_cast<float>(v));
    if (type == ProblemType::kRegression) {
      const double e = p[0] - data.validation_targets[i];
      loss += e * e;
    } else if (type == ProblemType::kMultiLabel) {
      for (size_t c = 0; c < k; ++c) {
        const double q = std::clamp(p[c], 1e-12, 1.0 - 1e-12);
        loss -= (data.validation_targets[i * k + c] > 0.5f ? std::log(q) : std::log1p(-q)) /
                static_cast<double>(k);
      }
    } else {
      loss -= std::log(p[static_cast<size_t>(data.validation_labels[i])]);
      predictions.push_back(static_cast<int64_t>(std::max_element(p.begin(), p.end()) - p.begin()));
    }
  }
  EpochMetrics m;  // as an evaluation during training computes them
  m.problem_type = type;
  m.validation_loss = n == 0 ? 0.0 : loss / static_cast<double>(n);
  if (type == ProblemType::kRegression) {
    m.regression = ComputeRegressionMetrics(
        std::vector<double>(data.validation_targets.begin(), data.validation_targets.end()),
        std::vector<double>(outputs.begin(), outputs.end()));
  } else if (type == ProblemType::kMultiLabel) {
    m.classification = ComputeMultiLabelMetrics(data.validation_targets, outputs, data.num_labels,
                                                model.hp.threshold);
  } else {
    m.classification = ComputeClassificationMetrics(data.validation_labels, predictions,
                                                    data.num_labels, &outputs);
  }
  const auto at = std::find(model.labels.begin(), model.labels.end(), model.inputs.positive_label);
  const int64_t positive = at == model.labels.end() ? 1 : at - model.labels.begin();
  // Every metric of the problem type (train_metric.h's table), the undefined ones left out.
  Json j{{"examples", n}};
  for (TrainMetric metric : MetricsOf(type)) {
    const double value = TrainMetricValue(metric, m, positive);
    if (!std::isnan(value)) j[TrainMetricName(metric)] = value;
  }
  return j;
}

// FailedPrecondition naming the data file's lines whose logits are not finite (their predictions
// were written empty), so that a script sees a non-zero exit.
Status CheckOutputsFinite(const PredictArgs& args, const std::vector<std::vector<float>>& logits,
                          const std::vector<int64_t>& lines, bool labelled) {
  std::vector<int64_t> bad;
  std::string example;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (AllFinite(logits[i])) continue;
    bad.push_back(i < lines.size() ? lines[i] : static_cast<int64_t>(i + 1));
    for (float v : logits[i]) {
      if (example.empty() && !std::isfinite(v)) example = FormatNumber(v);
    }
  }
  if (bad.empty()) return Status::Ok();
  return FailedPreconditionError(fmt::format(
      "the model's outputs are not finite (e.g. {}) on {} of {} rows of {} (line{} {}); {} "
      "written without a prediction (\"nonfinite\": true){}; check the model's weights (a "
      "warning above names the tensors when they are not finite)",
      example, bad.size(), logits.size(), args.data, bad.size() == 1 ? "" : "s", ShortList(bad),
      bad.size() == 1 ? "it is" : "they are", labelled ? " and no metric is computed" : ""));
}

int Predict(const PredictArgs& args) {
  auto model = ReadSavedModel(args.model);
  if (!model.ok()) return Fail(model.status());
  TextTrainData data;
  std::vector<std::string> texts, pairs;
  std::vector<int64_t> lines;
  bool labelled = false;
  if (Status st = LoadPredictData(args, *model, data, texts, pairs, lines, labelled); !st.ok())
    return Fail(st);
  auto trainer = LoadTrainer(args.device, args.threads, std::nullopt, /*count_cpu_memory=*/false);
  if (!trainer.ok()) return Fail(trainer.status());
  TrainJob job;
  job.model = model->checkpoint.model;
  job.hp = model->hp;
  job.hp.dropout = job.hp.attention_dropout = 0;
  if (args.batch_size > 0) job.hp.eval_batch_size = args.batch_size;
  job.data = &data;
  auto logits = (*trainer)->Predict(job);
  if (!logits.ok()) return Fail(logits.status());
  std::ofstream file;
  if (!args.output.empty()) {
    file.open(args.output, std::ios::trunc);
    if (!file)
      return Fail(InvalidArgumentError(fmt::format("--output: cannot write '{}'", args.output)));
  }
  WritePredictions(args, *model, texts, pairs, *logits, args.output.empty() ? std::cout : file);
  if (Status st = CheckOutputsFinite(args, *logits, lines, labelled); !st.ok()) return Fail(st);
  if (!labelled) return kExitOk;
  Json metrics = PredictMetrics(data, *model, *logits);
  metrics["metric"] = model->metric;
  metrics["value"] = metrics.value(model->metric, Json());
  if (!model->trial.is_null()) metrics["trial"] = model->trial;
  spdlog::info("{} = {:.6f} on {} labelled examples of {} (loss {:.6f})", model->metric,
               metrics["value"].is_number() ? metrics["value"].get<double>() : NAN, texts.size(),
               args.data, metrics.value("loss", std::nan("")));
  std::cerr << metrics.dump() << "\n";
  return kExitOk;
}

}  // namespace

std::function<int()> DeclarePredict(CLI::App& command) {
  auto args = std::make_shared<PredictArgs>();
  command
      .add_option("--model", args->model,
                  "A model directory written by --save-best (or a checkpoint with a "
                  "classifier head)")
      ->required();
  command.add_option("--data", args->data, "JSONL, CSV or TSV file of texts (labels optional)")
      ->required();
  command.add_option("--output", args->output, "Write the predictions here (default: stdout)");
  command.add_option("--format", args->format, "Output format: jsonl or csv")
      ->check(CLI::IsMember({"jsonl", "csv"}));
  command.add_option("--data-format", args->data_format, "auto (by extension), jsonl, csv or tsv");
  command.add_option("--text-column", args->text_column,
                     "The text column (default: the one the model was trained on, else text)");
  command.add_option("--text-pair-column", args->text_pair_column,
                     "The second text of sentence pairs (default: the one the model was trained "
                     "on, if any)");
  command.add_option("--label-column", args->label_column,
                     "The label column, read as the model's problem type (default: the one the "
                     "model was trained on, else label)");
  command.add_option("--device", args->device, "cpu, cuda or cuda:N (default: cpu)");
  command.add_option("--threads", args->threads, "Intra-op threads on CPU (0: one per core)");
  command.add_option("--batch-size", args->batch_size,
                     "Evaluation batch size (default: the "
                     "saved trial's)");
  return [args] { return Predict(*args); };
}

}  // namespace tune::app
