// `tune plan`: will these models, with N parallel requests, fit on the device? Weights per format,
// per-request memory (KV cache, prefill, decode, logits), the total, the headroom, the largest
// request count that fits and (--suggest) the changes that make it fit.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>

#include "app.h"
#include "commands.h"
#include "memory/inference.h"
#include "util/device.h"
#include "util/json_file.h"

namespace tune::app {
namespace {

struct PlanArgs {
  std::optional<std::string> plan;  // a plan file
  std::vector<std::string> models;  // MODEL[=FORMAT[:ROLE]] without a plan file
  std::optional<std::string> catalog;
  std::optional<int64_t> requests;
  std::optional<int64_t> prompt_tokens, max_new_tokens, max_length;
  std::optional<std::string> device_memory;
  std::optional<double> margin;
  std::string device = "cuda";
  bool suggest = false;
  std::string format = "table";
};

Result<ModelCatalog> LoadPlanCatalog(const PlanArgs& args) {
  TUNE_ASSIGN_OR_RETURN(ModelCatalog catalog, ModelCatalog::Builtin());
  if (args.catalog) {
    TUNE_ASSIGN_OR_RETURN(Json doc, ReadJsonFile(*args.catalog));
    if (!doc.is_object() || !doc.contains("models")) {
      return InvalidArgumentError(
          fmt::format("{}: a model catalog needs a \"models\" object", *args.catalog));
    }
    TUNE_RETURN_IF_ERROR(catalog.Merge(doc["models"], *args.catalog, "/models"));
  }
  return catalog;
}

// --model MODEL[=FORMAT[+dq][:ROLE]] as a plan entry.
Json ModelFlag(const std::string& text) {
  Json m = Json::object();
  const size_t eq = text.find('=');
  m["model"] = text.substr(0, eq);
  if (eq == std::string::npos) return m;
  const std::string rest = text.substr(eq + 1);
  const size_t colon = rest.find(':');
  std::string format = rest.substr(0, colon);
  if (format.size() > 3 && format.compare(format.size() - 3, 3, "+dq") == 0) {
    format.resize(format.size() - 3);
    m["double_quant"] = true;
  }
  m["format"] = format;
  if (colon != std::string::npos) m["role"] = rest.substr(colon + 1);
  return m;
}

// The plan document (a file, or one built from --model) with the flags applied over it.
Result<std::pair<Json, std::string>> PlanDocument(const PlanArgs& args) {
  Json doc = Json::object();
  std::string source = "<command line>";
  if (args.plan) {
    if (!args.models.empty()) {
      return InvalidArgumentError("give models either in --plan FILE or with --model, not both");
    }
    TUNE_ASSIGN_OR_RETURN(doc, ReadJsonFile(*args.plan));
    if (!doc.is_object()) return InvalidArgumentError(*args.plan + ": a plan is a JSON object");
    source = *args.plan;
  } else if (args.models.empty()) {
    return InvalidArgumentError(
        "tune plan needs --plan FILE or at least one --model MODEL[=FORMAT]");
  } else {
    doc["models"] = Json::array();
    for (const std::string& m : args.models) doc["models"].push_back(ModelFlag(m));
  }
  if (args.requests) doc["requests"] = *args.requests;
  if (args.prompt_tokens) doc["prompt_tokens"] = *args.prompt_tokens;
  if (args.max_new_tokens) doc["max_new_tokens"] = *args.max_new_tokens;
  if (args.max_length) doc["max_length"] = *args.max_length;
  if (args.device_memory) doc["device_memory"] = *args.device_memory;
  if (args.margin) doc["margin"] = *args.margin;
  return std::make_pair(doc, source);
}

int64_t Activations(const InferenceEstimate& e) {
  return std::max(e.prefill + e.dequant, e.decode);
}

Json ModelJson(const InferenceModel& m, const PlanModelResult& r) {
  const InferenceEstimate& e = r.estimate;
  return Json{{"name", m.label},
              {"model", m.model.name},
              {"role", InferenceRoleName(m.role)},
              {"format", WeightFormatName(m.format)},
              {"double_quant", m.double_quant},
              {"num_parameters", e.weights.num_parameters},
              {"weights",
               {{"total", e.weights.total()},
                {"linear", e.weights.linear},
                {"scales", e.weights.scales},
                {"embeddings", e.weights.embeddings},
                {"other", e.weights.other}}},
              {"per_request",
               {{"kv_cache", e.kv_cache},
                {"prefill", e.prefill},
                {"decode", e.decode},
                {"logits", e.logits},
                {"dequant", e.dequant},
                {"total", e.per_request}}},
              {"total", r.total}};
}

Json SuggestionsJson(const std::vector<PlanSuggestion>& s) {
  Json out = Json::array();
  for (const PlanSuggestion& x : s) {
    out.push_back({{"change", x.change},
                   {"saved", x.saved},
                   {"total", x.total},
                   {"fits", x.fits},
                   {"max_requests", x.max_requests}});
  }
  return out;
}

Json PlanJson(const InferencePlan& plan, const PlanResult& r,
              const std::optional<std::vector<PlanSuggestion>>& suggestions) {
  Json models = Json::array();
  for (size_t k = 0; k < plan.models.size(); ++k)
    models.push_back(ModelJson(plan.models[k], r.models[k]));
  Json out{{"models", models},
           {"requests", r.requests},
           {"weights", r.weights},
           {"per_request", r.per_request},
           {"fragmentation", r.fragmentation},
           {"context", r.context},
           {"workspace", r.workspace},
           {"total", r.total}};
  if (plan.device_memory) {
    out["device_memory"] = *plan.device_memory;
    out["margin"] = plan.margin;
    out["usable"] = r.usable;
    out["fits"] = r.fits;
    out["headroom"] = r.usable - r.total;
    out["max_requests"] = r.max_requests;
  }
  if (suggestions) out["suggestions"] = SuggestionsJson(*suggestions);
  return out;
}

std::vector<std::vector<std::string>> ModelRows(const InferencePlan& plan, const PlanResult& r,
                                                bool csv) {
  auto size = [csv](int64_t b) { return csv ? std::to_string(b) : FormatBytes(b); };
  std::vector<std::vector<std::string>> rows = {{"name", "model", "role", "format", "weights",
                                                 "kv_cache", "activations", "per_request",
                                                 fmt::format("total_{}_requests", r.requests)}};
  for (size_t k = 0; k < plan.models.size(); ++k) {
    const InferenceModel& m = plan.models[k];
    const InferenceEstimate& e = r.models[k].estimate;
    rows.push_back({m.label, m.model.name, InferenceRoleName(m.role),
                    std::string(WeightFormatName(m.format)) + (m.double_quant ? "+dq" : ""),
                    size(e.weights.total()), size(e.kv_cache), size(Activations(e)),
                    size(e.per_request), size(r.models[k].total)});
  }
  rows.push_back({"all", "", "", "", size(r.weights), "", "", size(r.per_request),
                  size(r.weights + r.requests * r.per_request)});
  return rows;
}

void PrintVerdict(const InferencePlan& plan, const PlanResult& r) {
  std::cout << fmt::format(
      "total: weights {} + {} requests x {} + fragmentation {} + context {} + workspace {} = {}\n",
      FormatBytes(r.weights), r.requests, FormatBytes(r.per_request), FormatBytes(r.fragmentation),
      FormatBytes(r.context), FormatBytes(r.workspace), FormatBytes(r.total));
  if (!plan.device_memory) return;
  const std::string usable =
      fmt::format("{} usable ({} with a {:.0f}% margin)", FormatBytes(r.usable),
                  FormatBytes(*plan.device_memory), 100 * plan.margin);
  if (r.fits) {
    std::cout << fmt::format("fits at {} parallel requests: {} of {}; headroom {}\n", r.requests,
                             FormatBytes(r.total), usable, FormatBytes(r.usable - r.total));
  } else {
    std::cout << fmt::format("does not fit at {} parallel requests: {} needed, {}; {} short\n",
                             r.requests, FormatBytes(r.total), usable,
                             FormatBytes(r.total - r.usable));
  }
  if (r.max_requests == 0) {
    std::cout << "not even one request fits: the weights alone leave too little\n";
  } else {
    std::cout << fmt::format("largest number of parallel requests that fits: {}\n", r.max_requests);
  }
}

void PrintSuggestions(const std::vector<PlanSuggestion>& s, bool fits) {
  if (fits) {
    std::cout << "suggestions: none needed, the plan fits\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"change", "saves", "total after", "fits", "max requests after"}};
  for (const PlanSuggestion& x : s) {
    rows.push_back({x.change, FormatBytes(x.saved), FormatBytes(x.total), x.fits ? "yes" : "no",
                    std::to_string(x.max_requests)});
  }
  std::cout << "suggestions (those that make it fit first, then by memory saved):\n"
            << RenderTable(rows);
}

int Plan(const PlanArgs& args) {
  auto format = ParseFormat(args.format);
  if (!format.ok()) return Fail(format.status());
  auto device_name = ParseDevice(args.device);
  if (!device_name.ok()) {
    return Fail(InvalidArgumentError(
        fmt::format("unknown --device '{}'; valid: cpu, cuda, cuda:N", args.device)));
  }
  const DeviceMemoryModel device =
      device_name->is_cuda() ? DeviceMemoryModel::Cuda() : DeviceMemoryModel::Cpu();
  auto catalog = LoadPlanCatalog(args);
  if (!catalog.ok()) return Fail(catalog.status());
  auto doc = PlanDocument(args);
  if (!doc.ok()) return Fail(doc.status());
  auto plan = ParseInferencePlan(doc->first, doc->second, *catalog);
  if (!plan.ok()) return Fail(plan.status());
  auto result = EvaluatePlan(*plan, device);
  if (!result.ok()) return Fail(result.status());
  std::optional<std::vector<PlanSuggestion>> suggestions;
  if (args.suggest) {
    if (!plan->device_memory)
      return Fail(InvalidArgumentError("--suggest needs --device-memory SIZE"));
    auto s = SuggestPlanChanges(*plan, device);
    if (!s.ok()) return Fail(s.status());
    suggestions = std::move(*s);
  }
  if (*format == Format::kJson) {
    std::cout << PlanJson(*plan, *result, suggestions).dump(2) << "\n";
  } else if (*format == Format::kCsv) {
    std::cout << RenderCsv(ModelRows(*plan, *result, true));
  } else {
    std::cout << RenderTable(ModelRows(*plan, *result, false));
    PrintVerdict(*plan, *result);
    if (suggestions) PrintSuggestions(*suggestions, result->fits);
  }
  return result->fits ? kExitOk : kExitFailure;
}

}  // namespace

std::function<int()> DeclarePlan(CLI::App& command) {
  auto args = std::make_shared<PlanArgs>();
  command.add_option("--plan", args->plan, "A plan file (JSON: models, lengths, requests)");
  command.add_option("--model", args->models,
                     "MODEL[=FORMAT[:ROLE]] (repeatable): a catalog name, a config.json (or its "
                     "directory) or a Hugging Face cache name; FORMAT fp32, fp16, bf16, int8, "
                     "nf4, fp4 (+dq: double quantisation); ROLE generate, score, classify");
  command.add_option("--catalog", args->catalog,
                     "A model catalog file merged into the built-in one");
  command.add_option("--requests", args->requests, "Parallel requests")->check(CLI::PositiveNumber);
  command.add_option("--prompt-tokens", args->prompt_tokens, "Prompt tokens (generate, score)")
      ->check(CLI::PositiveNumber);
  command.add_option("--max-new-tokens", args->max_new_tokens, "Tokens generated (generate)")
      ->check(CLI::PositiveNumber);
  command.add_option("--max-length", args->max_length, "Tokens per sequence (classify)")
      ->check(CLI::PositiveNumber);
  command.add_option(
      "--device-memory", args->device_memory,
      "Device memory, e.g. 80GiB: says whether it fits and the largest request count");
  command.add_option("--margin", args->margin,
                     "Safety margin as a share of --device-memory (0.05)");
  command.add_option("--device", args->device, "cuda (default: caching allocator, context) or cpu");
  command.add_flag("--suggest", args->suggest,
                   "List the changes that make the plan fit, ranked by memory saved");
  command.add_option("--format", args->format, "table, json or csv");
  return [args] { return Plan(*args); };
}

}  // namespace tune::app
