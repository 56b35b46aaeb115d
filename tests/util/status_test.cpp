#include "tune/status.h"

#include <gtest/gtest.h>

namespace tune {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  TUNE_ASSIGN_OR_RETURN(int h, Half(x));
  TUNE_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status().ok());
  Status s = NotFoundError("x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: x");
  EXPECT_EQ(s.WithContext("ctx").message(), "ctx: x");
}

TEST(Result, PropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd");
  EXPECT_EQ(r.value_or(-1), -1);
}

}  // namespace
}  // namespace tune
