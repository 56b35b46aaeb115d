// The parent's side of the trial protocol (objectives/trial_protocol.h) with a real child
// process: its protocol lines reach the trial, and a line whose members have other types than
// the protocol's is an error naming the line, not an exception ending tune.
#include "objectives/trial_protocol.h"

#include <gtest/gtest.h>

#include <chrono>

#include "testing/memory_study.h"

namespace tune {
namespace {

// Polls `process` until a line fails (that Status) or the child ends (Ok), for at most 10 s.
Status PollToTheEnd(TrialProcess& process) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Status st = process.Poll(std::chrono::milliseconds(50)); !st.ok()) return st;
    if (process.finished()) return Status::Ok();
  }
  return UnavailableError("the child did not end in 10 s");
}

class ChildTrialProcessTest : public ::testing::Test {
 protected:
  // A child that prints `lines` (one each) and exits.
  Result<std::unique_ptr<TrialProcess>> Child(const std::string& lines) {
    SubprocessOptions options;
    options.argv = {"/bin/sh", "-c", "printf '%s\\n' " + lines};
    options.env = {"PATH=/usr/bin:/bin"};
    return ChildTrialProcess::Start(*memory_.trial, Json::object(), options);
  }

  testing::MemoryStudy memory_{"p"};
};

TEST_F(ChildTrialProcessTest, AReportReachesTheTrial) {
  auto child = Child(R"('{"report": {"value": 0.25, "step": 3}}')");
  ASSERT_TRUE(child.ok()) << child.status().message();
  ASSERT_TRUE(PollToTheEnd(**child).ok());
  auto stored = memory_.study->storage().GetTrial(memory_.trial->trial_id());
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->intermediate_values.count(3), 1u);
  EXPECT_EQ(stored->intermediate_values.at(3), 0.25);
}

TEST_F(ChildTrialProcessTest, AMalformedLineIsAnErrorNamingIt) {
  for (const char* line : {R"('{"report": 1}')", R"('{"report": {"value": "high"}}')",
                           R"('{"user_attr": {"key": 7, "value": 1}}')"}) {
    SCOPED_TRACE(line);
    auto child = Child(line);
    ASSERT_TRUE(child.ok()) << child.status().message();
    const Status st = PollToTheEnd(**child);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("the trial's process wrote a malformed protocol line"),
              std::string::npos)
        << st.message();
    const std::string quoted(line + 1, std::char_traits<char>::length(line) - 2);
    EXPECT_NE(st.message().find(quoted), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace tune
