// The trainer's own CPU kernels: AdamW (src/torch/torch_fused_adamw.h), its fused step against
// LibTorch's torch::optim::AdamW, gradient clipping folded into the step and the fallback path,
// the learning rate as a tensor; dropout (src/torch/torch_dropout.h), its keep rate, scaling,
// gradient and reproducibility; the fused elementwise functions (torch_fused_elementwise.h) on
// the CPU against their unfused references, forward and every gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "torch/torch_dropout.h"
#include "torch/torch_fused_adamw.h"
#include "torch/torch_fused_elementwise.h"
#include "torch/torch_version.h"

namespace tune::internal {
namespace {

// Two parameter groups (decayed and not), as the trainer builds them; the matrix spans more
// than one parallel chunk.
struct Params {
  std::vector<torch::Tensor> decay, no_decay;
  std::vector<torch::Tensor> all() const {
    std::vector<torch::Tensor> v = decay;
    v.insert(v.end(), no_decay.begin(), no_decay.end());
    return v;
  }
};

Params MakeParams(torch::Dtype dtype, uint64_t seed) {
  torch::manual_seed(seed);
  Params p;
  p.decay.push_back(torch::randn({400, 100}, dtype).requires_grad_());
  p.decay.push_back(torch::randn({7, 3}, dtype).requires_grad_());
  p.no_decay.push_back(torch::randn({100}, dtype).requires_grad_());
  return p;
}

template <typename Optim>
std::unique_ptr<Optim> MakeAdamW(const Params& p) {
  auto options = [](double wd) {
    auto o = std::make_unique<torch::optim::AdamWOptions>(1e-2);
    o->betas({0.9, 0.98}).eps(1e-6).weight_decay(wd);
    return o;
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(p.decay, options(0.05));
  groups.emplace_back(p.no_decay, options(0.0));
  return std::make_unique<Optim>(groups, torch::optim::AdamWOptions(1e-2));
}

// Gives both parameter sets the same fresh gradients (step-dependent), `scale` times them on
// the reference side.
void SetGradients(const Params& a, const Params& b, int step, double scale_b) {
  torch::manual_seed(1000 + step);
  auto pa = a.all(), pb = b.all();
  for (size_t i = 0; i < pa.size(); ++i) {
    torch::Tensor g = torch::randn(pa[i].sizes(), pa[i].scalar_type());
    pa[i].mutable_grad() = g.clone();
    pb[i].mutable_grad() = g * scale_b;
  }
}

double MaxRelativeDifference(const Params& a, const Params& b) {
  double worst = 0;
  auto pa = a.all(), pb = b.all();
  for (size_t i = 0; i < pa.size(); ++i) {
    torch::Tensor d = (pa[i] - pb[i]).abs() / (pb[i].abs() + 1e-3);
    worst = std::max(worst, d.max().item<double>());
  }
  return worst;
}

void SetLr(torch::optim::Optimizer& o, double lr) {
  for (auto& g : o.param_groups()) g.options().set_lr(lr);
}

TEST(FusedAdamW, FusedCpuStepMatchesTorchAdamW) {
  Params fused = MakeParams(torch::kFloat, 7), reference = MakeParams(torch::kFloat, 7);
  auto ours = MakeAdamW<FusedAdamW>(fused);
  auto theirs = MakeAdamW<torch::optim::AdamW>(reference);
  const Params start = {{fused.decay[0].detach().clone()}, {}};
  for (int step = 0; step < 6; ++step) {
    SetGradients(fused, reference, step, 1.0);
    SetLr(*ours, 1e-2 * (6 - step) / 6.0);  // a schedule: each step's lr counts
    SetLr(*theirs, 1e-2 * (6 - step) / 6.0);
    ours->step();
    theirs->step();
  }
  EXPECT_EQ(ours->steps(fused.decay[0]), 6);
  // The parameters moved (lr 1e-2 over 6 steps) and agree to float rounding.
  EXPECT_GT((fused.decay[0] - start.decay[0]).abs().max().item<double>(), 1e-2);
  EXPECT_LT(MaxRelativeDifference(fused, reference), 1e-5);
}

// The fused device kernel's call (the CUDA path) on the CPU, where LibTorch >= 2.4 has the
// kernel: the step count is advanced before the kernel reads it (at 0 its bias corrections
// divide by zero: NaN weights, found on an H100), and 6 steps with a schedule match AdamW.
TEST(FusedAdamW, TheDeviceKernelMatchesTorchAdamW) {
#if TUNE_TORCH_AT_LEAST(2, 4)
  Params fused = MakeParams(torch::kFloat, 7), reference = MakeParams(torch::kFloat, 7);
  auto ours = MakeAdamW<FusedAdamW>(fused);
  ours->set_device_kernel_on_cpu(true);
  auto theirs = MakeAdamW<torch::optim::AdamW>(reference);
  for (int step = 0; step < 6; ++step) {
    SetGradients(fused, reference, step, 1.0);
    SetLr(*ours, 1e-2 * (6 - step) / 6.0);
    SetLr(*theirs, 1e-2 * (6 - step) / 6.0);
    ours->step();
    theirs->step();
  }
  EXPECT_EQ(ours->steps(fused.decay[0]), 6);
  EXPECT_LT(MaxRelativeDifference(fused, reference), 1e-5);
#else
  GTEST_SKIP() << "at::_fused_adamw_ has a CPU kernel from LibTorch 2.4 (this is "
               << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << ")";
#endif
}

// fp16 loss scaling's skipped step: with found_inf set, the step leaves parameters, moments
// and the step count as they were, on the fused device kernel (read on the device) and on the
// CPU path (read back once); so steps 0, 1 (skipped) and 2 equal a run of steps 0 and 2.
TEST(FusedAdamW, AStepWithFoundInfIsSkipped) {
  for (bool device_kernel : {false, true}) {
#if !TUNE_TORCH_AT_LEAST(2, 4)
    if (device_kernel) continue;  // at::_fused_adamw_'s CPU kernel is 2.4's
#endif
    SCOPED_TRACE(device_kernel ? "device kernel" : "CPU path");
    Params skipping = MakeParams(torch::kFloat, 5), reference = MakeParams(torch::kFloat, 5);
    auto ours = MakeAdamW<FusedAdamW>(skipping);
    auto theirs = MakeAdamW<FusedAdamW>(reference);
    ours->set_device_kernel_on_cpu(device_kernel);
    theirs->set_device_kernel_on_cpu(device_kernel);
    Params unused = MakeParams(torch::kFloat, 5);
    for (int step = 0; step < 3; ++step) {
      SetGradients(skipping, unused, step, 1.0);
      ours->set_found_inf(torch::full({1}, step == 1 ? 1.0f : 0.0f));
      const Params before = {{skipping.decay[0].detach().clone()}, {}};
      ours->step();
      if (step == 1) {
        EXPECT_TRUE(torch::equal(skipping.decay[0], before.decay[0]));
        continue;
      }
      SetGradients(reference, unused, step, 1.0);
      theirs->step();
    }
    EXPECT_LT(MaxRelativeDifference(skipping, reference), 1e-6);
  }
}

TEST(FusedAdamW, GradientScaleEqualsScaledGradientsForOneStep) {
  Params fused = MakeParams(torch::kFloat, 3), reference = MakeParams(torch::kFloat, 3);
  auto ours = MakeAdamW<FusedAdamW>(fused);
  auto theirs = MakeAdamW<torch::optim::AdamW>(reference);
  for (int step = 0; step < 3; ++step) {
    // Step 1 is clipped on our side by the optimizer, on theirs by scaling the gradients.
    const double scale = step == 1 ? 0.25 : 1.0;
    SetGradients(fused, reference, step, scale);
    ours->set_grad_scale(scale);
    ours->step();
    theirs->step();
  }
  EXPECT_LT(MaxRelativeDifference(fused, reference), 1e-5);
  // Without the scale on our side step 1 differs: the scale is applied, and only once.
  Params unscaled = MakeParams(torch::kFloat, 3);
  auto plain = MakeAdamW<FusedAdamW>(unscaled);
  for (int step = 0; step < 3; ++step) {
    SetGradients(unscaled, reference, step, 1.0);
    plain->step();
  }
  EXPECT_GT(MaxRelativeDifference(unscaled, fused), 1e-4);
}

TEST(FusedAdamW, OtherDtypesTakeTorchAdamWsTensorOps) {
  Params fused = MakeParams(torch::kDouble, 5), reference = MakeParams(torch::kDouble, 5);
  auto ours = MakeAdamW<FusedAdamW>(fused);
  auto theirs = MakeAdamW<torch::optim::AdamW>(reference);
  for (int step = 0; step < 4; ++step) {
    const double scale = step == 2 ? 0.375 : 1.0;  // clipped, applied to the gradients in place
    SetGradients(fused, reference, step, scale);
    ours->set_grad_scale(scale);
    ours->step();
    theirs->step();
  }
  for (size_t i = 0; i < fused.all().size(); ++i) {
    EXPECT_TRUE(torch::equal(fused.all()[i], reference.all()[i])) << "parameter " << i;
  }
}

TEST(FusedAdamW, SkipsParametersWithoutGradientsAndRejectsAmsgrad) {
  Params p = MakeParams(torch::kFloat, 9);
  auto opt = MakeAdamW<FusedAdamW>(p);
  p.decay[0].mutable_grad() = torch::ones_like(p.decay[0]);
  const torch::Tensor untouched = p.decay[1].detach().clone();
  opt->step();
  EXPECT_EQ(opt->steps(p.decay[0]), 1);
  EXPECT_EQ(opt->steps(p.decay[1]), 0);
  EXPECT_TRUE(torch::equal(p.decay[1], untouched));

  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(p.all());
  EXPECT_THROW(FusedAdamW(groups, torch::optim::AdamWOptions(1e-3).amsgrad(true)), c10::Error);
}

TEST(FusedAdamW, GradientNormAndClipCoefficientMatchClipGradNorm) {
  Params ours = MakeParams(torch::kFloat, 11), theirs = MakeParams(torch::kFloat, 11);
  SetGradients(ours, theirs, 0, 1.0);
  ours.decay[1].mutable_grad() = torch::Tensor();  // a parameter without a gradient counts 0
  theirs.decay[1].mutable_grad() = torch::Tensor();
  const double norm = GradientNorm(ours.all());
  const double max_norm = 2.0;
  const double torch_norm = torch::nn::utils::clip_grad_norm_(theirs.all(), max_norm);
  EXPECT_NEAR(norm, torch_norm, 1e-5 * torch_norm);
  EXPECT_GT(norm, 100.0);  // ~sqrt(40100) for N(0, 1) gradients
  const double c = ClipCoefficient(norm, max_norm);
  EXPECT_NEAR(c, max_norm / (norm + 1e-6), 1e-12);
  // clip_grad_norm_ scaled the gradients by exactly that coefficient.
  EXPECT_TRUE(torch::allclose(ours.decay[0].grad() * c, theirs.decay[0].grad(), 1e-6, 1e-8));
  EXPECT_EQ(ClipCoefficient(0.5, max_norm), 1.0);
}

// The device path of clipping (no read back: the coefficient stays a tensor), run here on CPU
// tensors: the same gradients as clip_grad_norm_, clipped when the norm is above max_norm and
// unchanged (multiplied by exactly 1) when it is within.
TEST(ClipGradientsOnDevice, MatchesClipGradNormAndLeavesSmallGradientsAlone) {
  for (const double max_norm : {2.0, 1e6}) {
    Params ours = MakeParams(torch::kFloat, 12), theirs = MakeParams(torch::kFloat, 12);
    SetGradients(ours, theirs, 0, 1.0);
    std::vector<torch::Tensor> grads;
    for (const auto& p : ours.all()) grads.push_back(p.grad());
    const std::vector<torch::Tensor> before = {grads[0].clone(), grads[1].clone()};
    ClipGradientsOnDevice(grads, max_norm);
    torch::nn::utils::clip_grad_norm_(theirs.all(), max_norm);
    for (size_t i = 0; i < grads.size(); ++i) {
      EXPECT_TRUE(torch::allclose(ours.all()[i].grad(), theirs.all()[i].grad(), 1e-5, 1e-7))
          << "max_norm " << max_norm << ", parameter " << i;
    }
    if (max_norm > 1e5) {
      EXPECT_TRUE(torch::equal(ours.all()[0].grad(), before[0]));
    } else {
      EXPECT_LT(ours.all()[0].grad().abs().max().item<double>(),
                before[0].abs().max().item<double>());
    }
  }
  ClipGradientsOnDevice({}, 1.0);  // nothing to clip
}

// Clipping folded into the step as a coefficient tensor (the device path: no pass of its own,
// no host wait): 4 steps, two clipped, equal clip_grad_norm_ and then torch::optim::AdamW, on the
// fused device kernel (which divides by the coefficient's reciprocal as it reads a gradient) and
// on the in-place path.
TEST(FusedAdamW, AClipCoefficientTensorEqualsClipGradNormThenAdamW) {
  for (bool device_kernel : {false, true}) {
#if !TUNE_TORCH_AT_LEAST(2, 4)
    if (device_kernel) continue;  // at::_fused_adamw_'s CPU kernel is 2.4's
#endif
    SCOPED_TRACE(device_kernel ? "device kernel" : "in place");
    Params fused = MakeParams(torch::kFloat, 13), reference = MakeParams(torch::kFloat, 13);
    auto ours = MakeAdamW<FusedAdamW>(fused);
    ours->set_device_kernel_on_cpu(device_kernel);
    auto theirs = MakeAdamW<torch::optim::AdamW>(reference);
    for (int step = 0; step < 4; ++step) {
      SetGradients(fused, reference, step, 1.0);
      const double max_norm = step % 2 == 0 ? 2.0 : 1e6;  // steps 0 and 2 clipped
      std::vector<torch::Tensor> grads;
      for (const auto& p : fused.all()) grads.push_back(p.grad());
      ours->set_clip_coefficient(ClipCoefficientOnDevice(grads, max_norm));
      torch::nn::utils::clip_grad_norm_(reference.all(), max_norm);
      ours->step();
      theirs->step();
    }
    EXPECT_LT(MaxRelativeDifference(fused, reference), 1e-5);
    // Unclipped, step 0's gradients (norm ~200) would have moved the weights differently.
    Params unclipped = MakeParams(torch::kFloat, 13);
    auto plain = MakeAdamW<FusedAdamW>(unclipped);
    plain->set_device_kernel_on_cpu(device_kernel);
    for (int step = 0; step < 4; ++step) {
      SetGradients(unclipped, reference, step, 1.0);
      plain->step();
    }
    EXPECT_GT(MaxRelativeDifference(unclipped, fused), 1e-4);
  }
}

// The share of kept elements of n Bernoulli(1 - p) draws is within 5 standard deviations.
void ExpectKeepRate(const torch::Tensor& noise, double p) {
  const auto n = static_cast<double>(noise.numel());
  const double kept = noise.ne(0).sum().item<double>() / n;
  EXPECT_NEAR(kept, 1 - p, 5 * std::sqrt(p * (1 - p) / n)) << "p = " << p;
}

TEST(Dropout, KeepsOneMinusPOfTheElementsScaledByItsInverse) {
  const torch::Tensor x = torch::rand({1000, 1000}) + 1.0f;  // no zeros of its own
  for (double p : {0.1, 0.5, 0.9}) {
    torch::manual_seed(1);
    const torch::Tensor y = Dropout(x, p, /*train=*/true);
    ExpectKeepRate(y, p);
    const torch::Tensor kept = y.ne(0);
    EXPECT_TRUE(torch::allclose(y.masked_select(kept), x.masked_select(kept) / (1 - p), 1e-6));
  }
  // Two halves of one hash are not correlated: neighbours are kept together at (1 - p)^2.
  torch::manual_seed(2);
  const torch::Tensor k = Dropout(x, 0.5, true).ne(0).flatten().to(torch::kFloat);
  const double both = (k.slice(0, 0, -1) * k.slice(0, 1)).mean().item<double>();
  EXPECT_NEAR(both, 0.25, 0.005);
}

TEST(Dropout, IdentityOutsideTrainingOrAtZeroAndZerosAtOne) {
  const torch::Tensor x = torch::randn({64, 33});
  EXPECT_TRUE(torch::equal(Dropout(x, 0.3, /*train=*/false), x));
  EXPECT_TRUE(torch::equal(Dropout(x, 0.0, /*train=*/true), x));
  EXPECT_TRUE(torch::equal(Dropout(x, 1.0, /*train=*/true), torch::zeros_like(x)));
  EXPECT_THROW(FastDropout(1.5), c10::Error);
  FastDropout module(0.3);
  module->eval();
  EXPECT_TRUE(torch::equal(module(x), x));
  module->train();
  EXPECT_FALSE(torch::equal(module(x), x));
}

TEST(Dropout, SeededReproducibleAndTheSameOnAnyNumberOfThreads) {
  const torch::Tensor x = torch::randn({300, 301});  // odd: the last hash is half used
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  torch::manual_seed(42);
  const torch::Tensor a = Dropout(x, 0.2, true);
  const torch::Tensor a_next = Dropout(x, 0.2, true);
  at::set_num_threads(2);
  torch::manual_seed(42);
  const torch::Tensor b = Dropout(x, 0.2, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, a_next));  // each call draws a new seed
  // Restoring the generator's state (what checkpointing's recomputation does) repeats the mask.
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  const torch::Tensor state = gen.get_state();
  const torch::Tensor c = Dropout(x, 0.2, true);
  gen.set_state(state);
  EXPECT_TRUE(torch::equal(c, Dropout(x, 0.2, true)));
}

TEST(Dropout, GradientIsTheNoiseAndBf16IsSupported) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({50, 40}).requires_grad_();
  const torch::Tensor y = Dropout(x, 0.25, true);
  y.sum().backward();
  // d(x * noise)/dx = noise = y / x where kept, 0 where dropped.
  EXPECT_TRUE(torch::allclose(x.grad(), (y / x).detach(), 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(x.grad().ne(0), y.ne(0)));

  const torch::Tensor h = (torch::rand({400, 400}) + 1.0f).to(torch::kBFloat16);
  const torch::Tensor yh = Dropout(h, 0.1, true);
  EXPECT_EQ(yh.scalar_type(), torch::kBFloat16);
  ExpectKeepRate(yh, 0.1);
  // Other dtypes take torch::dropout.
  const torch::Tensor yd = Dropout(torch::ones({400, 400}, torch::kDouble), 0.1, true);
  EXPECT_EQ(yd.scalar_type(), torch::kDouble);
  ExpectKeepRate(yd, 0.1);
}

// The learning rate as a device tensor (what a captured CUDA graph reads each replay) gives the
// steps the double gives, through the fused kernel (its CPU form, LibTorch >= 2.4).
TEST(FusedAdamW, ATensorLearningRateEqualsTheDouble) {
  if (!FusedDeviceLrTensor()) GTEST_SKIP() << "the kernel's tensor learning rate needs 2.4+";
  const Params a = MakeParams(torch::kFloat, 21), b = MakeParams(torch::kFloat, 21);
  auto by_double = MakeAdamW<FusedAdamW>(a), by_tensor = MakeAdamW<FusedAdamW>(b);
  by_double->set_device_kernel_on_cpu(true);
  by_tensor->set_device_kernel_on_cpu(true);
  const torch::Tensor lr = torch::zeros({}, torch::kFloat);
  by_tensor->set_lr_tensor(lr);
  for (int step = 0; step < 4; ++step) {
    const double rate = 1e-2 / (step + 1);  // a schedule: each step its own rate
    for (auto& group : by_double->param_groups()) group.options().set_lr(rate);
    lr.fill_(rate);
    SetGradients(a, b, step, 1.0);
    by_double->step();
    by_tensor->step();
  }
  const auto pa = a.all(), pb = b.all();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::allclose(pa[i], pb[i], 1e-6, 1e-7)) << "parameter " << i;
  }
}

// Inputs of the fused LayerNorm: x [2, 70, 48] (140 rows: three chunks of the column sums) in
// `dtype`, fp32 residual and parameters, all leaves that require gradients.
struct LayerNormInputs {
  explicit LayerNormInputs(torch::ScalarType dtype) {
    torch::manual_seed(31);
    x = torch::randn({2, 70, 48}).to(dtype).requires_grad_();
    residual = torch::randn({2, 70, 48}).requires_grad_();
    bias = (0.1 * torch::randn({48})).requires_grad_();
    gamma = (1 + 0.2 * torch::randn({48})).requires_grad_();
    beta = (0.1 * torch::randn({48})).requires_grad_();
  }
  LayerNormInputs Leaves() const {  // the same values, fresh leaves
    LayerNormInputs c = *this;
    for (torch::Tensor* t : {&c.x, &c.residual, &c.bias, &c.gamma, &c.beta}) {
      *t = t->detach().clone().requires_grad_();
    }
    return c;
  }
  std::vector<torch::Tensor> grads() const {
    return {x.grad(), residual.grad(), bias.grad(), gamma.grad(), beta.grad()};
  }
  torch::Tensor x, residual, bias, gamma, beta;
};

// bias + dropout + residual + LayerNorm, fused, against layer_norm((x + bias) * mask / (1 - p)
// + residual) with the mask it drew: the output and all five gradients, for fp32, bf16 and fp16
// inputs, with and without dropout.
TEST(FusedElementwise, LayerNormEqualsItsReferenceForwardAndBackward) {
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    for (double p : {0.0, 0.1}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " p " + std::to_string(p));
      const LayerNormInputs fused(dtype);
      const LayerNormInputs ref = fused.Leaves();
      auto [out, mask] = BiasDropoutAddLayerNormWithMask(fused.x, fused.bias, fused.residual,
                                                         fused.gamma, fused.beta, p, 1e-12, true);
      ASSERT_EQ(mask.defined(), p > 0);
      EXPECT_EQ(out.scalar_type(), torch::kFloat);
      EXPECT_EQ(out.sizes(), fused.x.sizes());
      const torch::Tensor expected = BiasDropoutAddLayerNormReference(
          ref.x, ref.bias, ref.residual, mask, ref.gamma, ref.beta, p, 1e-12);
      EXPECT_TRUE(torch::allclose(out, expected, 1e-5, 1e-5))
          << (out - expected).abs().max().item<double>();
      const torch::Tensor upstream = torch::randn(out.sizes());
      out.backward(upstream);
      expected.backward(upstream);
      const auto got = fused.grads(), want = ref.grads();
      const char* names[] = {"x", "residual", "bias", "gamma", "beta"};
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(got[i].defined()) << names[i];
        EXPECT_EQ(got[i].scalar_type(), want[i].scalar_type()) << names[i];
        // The x gradient of a low-precision x is rounded to it: compare at its precision.
        const double tolerance = i == 0 && dtype != torch::kFloat ? 1e-2 : 1e-4;
        EXPECT_TRUE(torch::allclose(got[i].to(torch::kFloat), want[i].to(torch::kFloat), tolerance,
                                    tolerance))
            << names[i] << ": "
            << (got[i].to(torch::kFloat) - want[i].to(torch::kFloat)).abs().max().item<double>();
      }
    }
  }
}

// The fused dropout keeps 1 - p of the elements, is reproducible from torch::manual_seed, and is
// off outside training.
TEST(FusedElementwise, DropoutKeepsOneMinusPSeededAndOffInEvaluation) {
  const torch::Tensor x = torch::randn({400, 256}), residual = torch::zeros({400, 256});
  const torch::Tensor bias = torch::zeros({256}), gamma = torch::ones({256}),
                      beta = torch::zeros({256});
  for (double p : {0.1, 0.5}) {
    torch::manual_seed(5);
    const torch::Tensor m1 =
        BiasDropoutAddLayerNormWithMask(x, bias, residual, gamma, beta, p, 1e-12, true).second;
    ExpectKeepRate(m1, p);
    torch::manual_seed(5);
    const torch::Tensor m2 =
        BiasDropoutAddLayerNormWithMask(x, bias, residual, gamma, beta, p, 1e-12, true).second;
    EXPECT_TRUE(torch::equal(m1, m2));
    const torch::Tensor m3 =
        BiasDropoutAddLayerNormWithMask(x, bias, residual, gamma, beta, p, 1e-12, true).second;
    EXPECT_FALSE(torch::equal(m1, m3)) << "the next call draws a new mask";
  }
  const auto eval = BiasDropoutAddLayerNormWithMask(x, bias, residual, gamma, beta, 0.5, 1e-12,
                                                    /*train=*/false);
  EXPECT_FALSE(eval.second.defined());
  EXPECT_TRUE(
      torch::allclose(eval.first, torch::layer_norm(x, {256}, gamma, beta, 1e-12), 1e-5, 1e-5));
}

// bias + GELU, fused, against gelu(x + bias): output (x's dtype) and both gradients.
TEST(FusedElementwise, BiasGeluEqualsItsReferenceForwardAndBackward) {
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    torch::manual_seed(32);
    const torch::Tensor x0 = (2 * torch::randn({3, 50, 96})).to(dtype);
    const torch::Tensor b0 = torch::randn({96});
    torch::Tensor x = x0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    torch::Tensor xr = x0.clone().requires_grad_(), br = b0.clone().requires_grad_();
    const torch::Tensor out = BiasGelu(x, b), expected = BiasGeluReference(xr, br);
    EXPECT_EQ(out.scalar_type(), dtype);
    const double tolerance = dtype == torch::kFloat ? 1e-5 : 1e-2;
    EXPECT_TRUE(
        torch::allclose(out.to(torch::kFloat), expected.to(torch::kFloat), tolerance, tolerance));
    const torch::Tensor upstream = torch::randn(out.sizes()).to(dtype);
    out.backward(upstream);
    expected.backward(upstream);
    EXPECT_EQ(x.grad().scalar_type(), dtype);
    EXPECT_TRUE(torch::allclose(x.grad().to(torch::kFloat), xr.grad().to(torch::kFloat), tolerance,
                                tolerance));
    // The bias gradient sums 150 rows: relative to its size.
    const double scale = br.grad().abs().max().item<double>();
    EXPECT_LT((b.grad() - br.grad()).abs().max().item<double>(), tolerance * scale + 1e-5);
  }
}

// The parameters must be fp32 vectors of the last dimension's size on x's device.
TEST(FusedElementwise, RefusesParametersOfAnotherShapeOrDtype) {
  const torch::Tensor x = torch::randn({4, 8});
  try {
    BiasGelu(x, torch::zeros({7}));
    ADD_FAILURE() << "a bias of 7 for 8 columns was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("of shape [8]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(BiasDropoutAddLayerNorm(x, torch::zeros({8}, torch::kDouble), x, torch::ones({8}),
                                       torch::zeros({8}), 0.1, 1e-5, true),
               c10::Error);
  EXPECT_TRUE(FusedElementwiseRunsOn(torch::Device(torch::kCPU)));
  EXPECT_EQ(FusedElementwiseRunsOn(torch::Device(torch::kCUDA, 0)), FusedElementwiseKernelsBuilt());
}

}  // namespace
}  // namespace tune::internal
