// The local Hugging Face cache, read offline [tune_train, private]: where it is and the layout
// models--ORG--NAME/snapshots/<rev>/, with refs/main naming <rev>. The one home of that layout for
// the train objective's checkpoints (pretrained.h), tune init, and the config.json of a Hub name
// in tune plan and tune estimate (inference.h).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace tune {

// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
std::string HuggingFaceHubCache();

// "models--ORG--NAME" for "ORG/NAME".
std::string HubRepoFolder(const std::string& name);

// The snapshot directory of `name` (ORG/NAME) in `cache`: the revision refs/main names, else the
// only snapshot; nullopt when there is none. `where` says what was looked for, for messages.
std::optional<std::filesystem::path> HubSnapshot(const std::string& name, const std::string& cache,
                                                 std::string& where);

}  // namespace tune
