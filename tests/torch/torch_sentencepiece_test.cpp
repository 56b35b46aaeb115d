// LibTorch and SentencePiece in one process. Debian's libsentencepiece.so.0 exports its own
// protobuf-lite; linked into a process that also loads LibTorch (libprotobuf.so) the two
// interposed and the process crashed in protobuf's static initialisation, before main. tune
// therefore opens SentencePiece through libtune_spm.so with dlopen(RTLD_LOCAL | RTLD_DEEPBIND)
// (src/tokenizers/sentencepiece.h). This binary links LibTorch: that it starts at all is the first
// half of the test; the tests below tokenize with an spm.model, check that protobuf's symbols
// still resolve to LibTorch's libprotobuf, and run a forward pass on the ids.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "testing/temp_dir.h"
#include "testing/tiny_encoders.h"
#include "tokenizers/tokenizer.h"
#include "torch/torch_models.h"

namespace tune::internal {
namespace {

namespace fs = std::filesystem;

// A DeBERTa-style spm.model trained by python3-sentencepiece; false when it cannot be.
bool TrainDebertaSpm(const fs::path& dir) {
  std::ofstream corpus(dir / "corpus.txt");
  for (int i = 0; i < 200; ++i) {
    corpus << "the quick brown fox jumps over the lazy dog " << i << "\n"
           << "Grüße aus Köln, привет мир, 東京タワー\n";
  }
  corpus.close();
  std::ofstream(dir / "train.py")
      << "import sentencepiece as spm\n"
         "spm.SentencePieceTrainer.train(input='"
      << (dir / "corpus.txt").string() << "', model_prefix='" << (dir / "spm").string()
      << "', vocab_size=80, model_type='unigram', minloglevel=2, pad_id=0, pad_piece='[PAD]', "
         "bos_id=1, bos_piece='[CLS]', eos_id=2, eos_piece='[SEP]', unk_id=3, "
         "unk_piece='[UNK]')\n";
  const std::string cmd = "/usr/bin/python3 '" + (dir / "train.py").string() + "' 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

// The file that defines the global-scope symbol `name` ("" when none does).
std::string DefiningLibrary(const char* name) {
  void* sym = dlsym(RTLD_DEFAULT, name);
  Dl_info info{};
  if (sym == nullptr || dladdr(sym, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

TEST(TorchSentencePiece, SpmTokenizerAndLibTorchShareOneProcess) {
  testing::TempDir dir;
  if (!TrainDebertaSpm(dir.path())) {
    GTEST_SKIP() << "python3-sentencepiece cannot train a model (Debian: python3-sentencepiece)";
  }
  auto tokenizer = Tokenizer::FromCheckpointDir(dir.path().string(), {});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const std::vector<int32_t> ids = tokenizer->EncodeForClassification("the lazy fox, привет", 12);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), tokenizer->cls_id());

  // SentencePiece stays out of the global scope; protobuf there, if any, is LibTorch's
  // (Debian's LibTorch links libprotobuf.so; PyPI's wheel keeps its protobuf to itself).
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "_ZN13sentencepiece22SentencePieceProcessorC1Ev"), nullptr);
  const std::string protobuf = DefiningLibrary("_ZN6google8protobuf8internal10LogMessage6FinishEv");
  EXPECT_EQ(protobuf.find("sentencepiece"), std::string::npos) << protobuf;
  if (!protobuf.empty()) {
    EXPECT_NE(protobuf.find("libprotobuf.so"), std::string::npos) << protobuf;
  }

  EncoderConfig c = testing::TinyDebertaConfig();
  c.vocab_size = tokenizer->vocab_size();
  HeadConfig head;
  head.num_labels = 2;
  torch::manual_seed(0);
  TransformerClassifier model(c, head);
  model->eval();
  torch::NoGradGuard no_grad;
  std::vector<int64_t> wide(ids.begin(), ids.end());
  torch::Tensor input = torch::tensor(wide, torch::kLong).unsqueeze(0);
  torch::Tensor logits = model->forward(input, torch::ones_like(input));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
}

}  // namespace
}  // namespace tune::internal
