// Measured-memory fits: exact recovery of a + b·B·T + c·B·T², the held-out check, the
// non-negative coefficients, what a fit needs, and the JSON round trip.
#include "measure/measured_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "memory/memory_model.h"

namespace tune {
namespace {

int64_t Truth(int64_t b, int64_t t) { return 300'000'000 + 2'000 * b * t + 24 * b * t * t; }

std::vector<MemoryPoint> Probes(const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  std::vector<MemoryPoint> points;
  for (auto [b, t] : shapes) points.push_back({b, t, Truth(b, t)});
  return points;
}

TEST(MeasuredFit, RecoversTheCoefficientsAndExtrapolatesInBatchAndLength) {
  auto fit =
      FitMeasuredMemory(Probes({{1, 64}, {2, 64}, {1, 128}, {2, 256}, {4, 32}}), "mine", "fp32");
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->a, 3e8, 1.0);
  EXPECT_NEAR(fit->b, 2000, 1e-4);
  EXPECT_NEAR(fit->c, 24, 1e-6);
  EXPECT_NEAR(fit->Fitted(32, 512), static_cast<double>(Truth(32, 512)), 10.0);
  // The held-out point is the largest B·T²; exact data predicts it exactly.
  EXPECT_EQ(fit->held_out.batch_size, 2);
  EXPECT_EQ(fit->held_out.max_length, 256);
  EXPECT_NEAR(fit->held_out_error, 0.0, 1e-9);
  EXPECT_NEAR(fit->margin(), MeasuredFit::kMinMargin, 1e-9);
  EXPECT_EQ(fit->Predict(8, 64),
            static_cast<int64_t>(std::ceil(fit->Fitted(8, 64) * (1 + fit->margin()))));
  // A measured shape: its own peak plus the least margin.
  EXPECT_EQ(fit->Predict(2, 64), static_cast<int64_t>(std::ceil(Truth(2, 64) * 1.05)));
}

TEST(MeasuredFit, TheHeldOutErrorMeasuresAModelTheFormulaDoesNotHold) {
  // Memory cubic in T: the quadratic through the short lengths underestimates the longest.
  std::vector<MemoryPoint> points;
  for (auto [b, t] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 64}, {2, 64}, {1, 128}, {1, 512}}) {
    points.push_back({b, t, 1'000'000 + b * t * t * t});
  }
  auto fit = FitMeasuredMemory(points, "cubic", "fp32");
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->held_out.max_length, 512);
  EXPECT_LT(fit->held_out_error, -0.5);
  EXPECT_GE(fit->margin(), -fit->held_out_error);
  // Every measured point is covered by the fit with its margin.
  for (const MemoryPoint& p : fit->points) {
    EXPECT_GE(fit->Fitted(p.batch_size, p.max_length) * (1 + fit->margin()), p.peak * (1 - 1e-12));
  }
}

TEST(MeasuredFit, AnOverestimateAtTheHeldOutShapeNeedsNoMargin) {
  // The largest shape costs less than the others promise (a constant per-example term at B=1):
  // the fit overestimates it, and the margin stays at its least unless a fitted point is under.
  std::vector<MemoryPoint> points = {{1, 64, 1000}, {1, 128, 2000}, {1, 256, 4000}, {2, 256, 5000}};
  auto fit = FitMeasuredMemory(points, "rss", "fp32");
  ASSERT_TRUE(fit.ok());
  EXPECT_GT(fit->held_out_error, 0.2);
  double under = 0;
  for (const MemoryPoint& p : fit->points) {
    under = std::max(under, p.peak / fit->Fitted(p.batch_size, p.max_length) - 1);
  }
  EXPECT_DOUBLE_EQ(fit->margin(), std::max(MeasuredFit::kMinMargin, under));
}

TEST(MeasuredFit, CoefficientsStayNonNegative) {
  // Noisy, falling with the batch at one length: an unconstrained fit would make b or c < 0.
  std::vector<MemoryPoint> points = {
      {1, 64, 1000}, {2, 64, 990}, {4, 64, 980}, {1, 128, 1000}, {8, 128, 995}};
  auto fit = FitMeasuredMemory(points, "flat", "fp32");
  ASSERT_TRUE(fit.ok());
  EXPECT_GE(fit->a, 0);
  EXPECT_GE(fit->b, 0);
  EXPECT_GE(fit->c, 0);
  // Larger shapes never predict less, and the points stay within their noise.
  EXPECT_GE(fit->Fitted(64, 512), fit->Fitted(1, 64));
  for (const MemoryPoint& p : points)
    EXPECT_NEAR(fit->Fitted(p.batch_size, p.max_length), p.peak, 20);
}

TEST(MeasuredFit, NeedsFourShapesAndTwoLengths) {
  // Three shapes: no residual to check. Four of one length: T's effect is unknown.
  EXPECT_FALSE(CanFit(Probes({{1, 64}, {2, 64}, {1, 128}})));
  EXPECT_FALSE(CanFit(Probes({{1, 64}, {2, 64}, {4, 64}, {8, 64}})));
  // The same shape twice is one shape (its largest peak); unmeasured points do not count.
  std::vector<MemoryPoint> repeated = Probes({{1, 64}, {1, 64}, {2, 64}, {1, 128}});
  repeated.push_back({4, 128, -1});
  EXPECT_FALSE(CanFit(repeated));
  auto fit = FitMeasuredMemory(repeated, "mine", "bf16");
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(fit.status().message().find("3 measured shape(s) with 2 value(s) of max_length"),
            std::string::npos)
      << fit.status().message();
  EXPECT_TRUE(CanFit(Probes({{1, 64}, {2, 64}, {4, 64}, {1, 128}})));
  const auto shapes = DistinctShapes({{2, 64, 10}, {2, 64, 30}, {1, 64, 5}});
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[1].peak, 30);
}

TEST(MeasuredFit, RoundTripsThroughJson) {
  auto fit =
      FitMeasuredMemory(Probes({{1, 64}, {2, 64}, {1, 128}, {2, 256}}), "sha256:ab12", "bf16");
  ASSERT_TRUE(fit.ok());
  const Json j = MeasuredFitToJson(*fit);
  auto back = MeasuredFitFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->model, "sha256:ab12");
  EXPECT_EQ(back->precision, "bf16");
  EXPECT_EQ(back->points.size(), 4u);
  EXPECT_EQ(back->Predict(16, 512), fit->Predict(16, 512));
  EXPECT_EQ(MeasuredFitKey("mine", "bf16"), "memory_fit:mine/bf16");
  Json bad = j;
  bad["points"][1]["peak"] = "big";
  EXPECT_NE(MeasuredFitFromJson(bad).status().message().find("points[1].peak"), std::string::npos);
  EXPECT_FALSE(MeasuredFitFromJson(Json::array()).ok());
  EXPECT_NE(MeasuredFitText(*fit).find("held out (B=2, T=256)"), std::string::npos)
      << MeasuredFitText(*fit);
}

TEST(MeasuredFit, AFloorKeepsTheOptimizerStepsPeakOutOfTheCurve) {
  // An LSTM-like step: the optimizer step peaks at 20 MB whatever the shape; the forward and
  // backward passes at 12 MB + 20 kB per token. Below 400 tokens every peak is the floor's.
  const double floor = 20e6;
  auto peak = [&](int64_t b, int64_t t) {
    return static_cast<int64_t>(std::max(floor, 12e6 + 20e3 * static_cast<double>(b * t)));
  };
  std::vector<MemoryPoint> points;
  for (auto [b, t] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 32}, {2, 32}, {4, 64}, {8, 64}, {4, 128}, {8, 128}, {16, 128}}) {
    points.push_back({b, t, peak(b, t)});
  }
  // Without the floor the flat points bend the curve: (16, 256) is far off.
  auto plain = FitMeasuredMemory(points, "lstm", "fp32");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_GT(std::abs(plain->Fitted(16, 256) / static_cast<double>(peak(16, 256)) - 1), 0.1);
  // With it the curve is fitted to the four points above it, and the floor is kept.
  auto fit = FitMeasuredMemory(points, "lstm", "fp32", floor);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_NEAR(fit->b, 20e3, 1.0);
  EXPECT_NEAR(fit->Fitted(16, 256), static_cast<double>(peak(16, 256)), 1e3);
  EXPECT_EQ(fit->Fitted(1, 8), floor);
  EXPECT_EQ(fit->points.size(), points.size());
  EXPECT_NE(MeasuredFitText(*fit).find("max(19.1 MiB, "), std::string::npos)
      << MeasuredFitText(*fit);
  auto back = MeasuredFitFromJson(MeasuredFitToJson(*fit));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->floor, floor);
  // Three points above the floor are not enough.
  points.pop_back();
  EXPECT_FALSE(CanFit(points, floor));
  EXPECT_TRUE(CanFit(points));
}

TEST(MeasuredFit, MaxBatchAgreesWithTheEstimateAtAMeasuredShape) {
  // Noisy peaks: the fit's margin exceeds kMinMargin, so a measured shape's own peak plus
  // kMinMargin is below the curve's prediction there. --max-batch (MaxBatchSize's binary search)
  // must still find the measured shape when the budget is what it is predicted to need; it
  // stopped one below it when a measured shape was predicted from its peak and the shape one
  // smaller from the curve.
  std::vector<MemoryPoint> points;
  const double noise[] = {1.0, 1.12, 0.95, 1.08, 1.0, 1.1};
  int k = 0;
  for (auto [b, t] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 64}, {4, 64}, {2, 128}, {8, 128}, {16, 128}, {4, 256}}) {
    points.push_back({b, t, static_cast<int64_t>(static_cast<double>(Truth(b, t)) * noise[k++])});
  }
  auto fit = FitMeasuredMemory(points, "noisy", "fp32");
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  ASSERT_GT(fit->margin(), 0.08);
  const FittedMemoryModel model(*fit);
  for (const MemoryPoint& p : fit->points) {
    MemoryRequest r;
    r.batch_size = p.batch_size;
    r.max_length = p.max_length;
    const int64_t budget = fit->Predict(p.batch_size, p.max_length);
    EXPECT_GE(budget, p.peak);  // never below what was measured
    auto best = MaxBatchSize(model, r, budget, 64);
    ASSERT_TRUE(best.ok());
    EXPECT_GE(*best, p.batch_size) << "measured B=" << p.batch_size << " T=" << p.max_length;
    // And it is the largest batch whose prediction fits (the predictions grow with the batch).
    for (int64_t b = 1; b < 64; ++b) {
      EXPECT_LE(fit->Predict(b, p.max_length), fit->Predict(b + 1, p.max_length));
    }
    EXPECT_LE(fit->Predict(*best, p.max_length), budget);
    EXPECT_GT(fit->Predict(*best + 1, p.max_length), budget);
  }
}

}  // namespace
}  // namespace tune
