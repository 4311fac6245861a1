// Stopping at a step boundary (train/stop.h): the request, the exit codes, and an arm that is
// interrupted, saved and resumed giving the same bits as one trained without a stop.
#include <doctest/doctest.h>

#include <csignal>
#include <random>

#include "tests/temp_dir.h"
#include "train/io/files.h"
#include "train/lm/micro_lm_training.h"
#include "train/stop.h"

using namespace dg;

TEST_CASE("a stop request becomes Interrupted with exit 130 (SIGINT) or 143 (SIGTERM)") {
  clear_stop_request();
  CHECK(stop_signal() == 0);
  CHECK_NOTHROW(stop_if_requested("after step 1"));
  request_stop(SIGINT);
  try {
    stop_if_requested("after step 3 of 9");
    FAIL("no Interrupted");
  } catch (const Interrupted& e) {
    CHECK(e.exit_code() == 130);
    CHECK(std::string(e.what()) == "stopped by SIGINT after step 3 of 9");
  }
  request_stop(SIGTERM);
  try {
    stop_if_requested("x");
    FAIL("no Interrupted");
  } catch (const Interrupted& e) {
    CHECK(e.exit_code() == 143);
  }
  clear_stop_request();
}

TEST_CASE("an arm stopped mid-training resumes from its checkpoint, bit for bit") {
  clear_stop_request();
  RunConfig run;
  run.model.vocab = 50;
  run.model.dim = 16;
  run.model.layers = 2;
  run.model.heads = 2;
  run.model.kv_heads = 2;
  run.model.seq_len = 16;
  run.training.steps = 12;
  run.training.schedule.total_steps = 12;
  run.data.eval_windows = 4;
  std::mt19937 rng(3);
  std::vector<int32_t> train(2000), validation(400);
  for (int32_t& id : train) id = static_cast<int32_t>(rng() % 50);
  for (int32_t& id : validation) id = static_cast<int32_t>(rng() % 50);

  const ArmResult whole = train_and_evaluate("rd", run, train, validation);

  test::TempDir dir("stop");
  const std::string checkpoint = dir.file("arm.safetensors");
  auto stop_after = [](int64_t step) {
    return [step](const StepLog& log) {
      if (log.step + 1 == step) request_stop(SIGINT);
      stop_if_requested("after a step");
    };
  };
  CHECK_THROWS_AS(
      train_and_evaluate("rd", run, train, validation, stop_after(5), false, checkpoint),
      Interrupted);
  clear_stop_request();
  REQUIRE(file_exists(checkpoint));
  int64_t resumed_from = -1;
  const ArmResult resumed = train_and_evaluate(
      "rd", run, train, validation,
      [&](const StepLog& log) {
        if (resumed_from < 0) resumed_from = log.step;
      },
      false, checkpoint);
  CHECK(resumed_from == 5);  // steps 0-4 were not trained again
  CHECK(resumed.losses == whole.losses);
  CHECK(resumed.grad_norms == whole.grad_norms);
  CHECK(resumed.lm_loss == whole.lm_loss);
  CHECK(resumed.train_routes.js_reference == whole.train_routes.js_reference);
  // Without a checkpoint path nothing is written and the exception still passes through.
  CHECK_THROWS_AS(train_and_evaluate("rd", run, train, validation, stop_after(2)), Interrupted);
  clear_stop_request();
}
