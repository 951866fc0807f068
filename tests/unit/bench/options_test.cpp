// Bad command lines give one clear message naming the flag; good ones pass. Also the CLI's
// exit codes for the same mistakes, when the strata binary is built.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "strata/bench/options.h"

namespace strata::bench {
namespace {

Options synth_options() {
  Options o;
  o.synth_recipe = "iq3_xxs";
  return o;
}

std::string error_of(const Options& o) {
  const Status s = validate(o);
  return s.ok() ? std::string("<ok>") : s.message();
}

TEST(Options, DefaultsWithSynthAreValid) { EXPECT_TRUE(validate(synth_options()).ok()); }

TEST(Options, CudaOnlyWhereBuilt) {
  Options o = synth_options();
  o.device = "cuda";
  if (cuda_built()) {
    EXPECT_TRUE(validate(o).ok()) << error_of(o);
  } else {
    const std::string e = error_of(o);
    EXPECT_NE(e.find("--device cuda"), std::string::npos) << e;
    EXPECT_NE(e.find("not available in this build"), std::string::npos) << e;
  }
  o.device = "tpu";
  EXPECT_NE(error_of(o).find("expected cpu or cuda, got 'tpu'"), std::string::npos);
}

TEST(Options, WindowSweepIsCudaForcedAndInRange) {
  Options o = synth_options();
  o.window_sweep = {1, 2, 8};
  EXPECT_NE(error_of(o).find("--window-sweep: only applies to --device cuda"), std::string::npos) << error_of(o);
  if (!cuda_built()) GTEST_SKIP() << "the remaining checks need --device cuda, absent from this build";
  o.device = "cuda";
  EXPECT_NE(error_of(o).find("--window-sweep: needs --forced"), std::string::npos) << error_of(o);
  o.forced = true;
  EXPECT_TRUE(validate(o).ok()) << error_of(o);
  o.window_sweep = {1, 9};
  EXPECT_NE(error_of(o).find("--window-sweep: expected windows of 1..8 tokens, got 9"), std::string::npos)
      << error_of(o);
  o.window_sweep = {};
  o.sweep_ctx = {256, 1024};
  EXPECT_NE(error_of(o).find("--sweep-ctx: only applies to --device cpu"), std::string::npos) << error_of(o);
}

TEST(Options, ExactlyOneModelSource) {
  Options none;
  EXPECT_NE(error_of(none).find("got neither"), std::string::npos);
  Options both = synth_options();
  both.model_path = "m.gguf";
  EXPECT_NE(error_of(both).find("got both"), std::string::npos);
}

TEST(Options, SynthChecks) {
  Options o = synth_options();
  o.synth_recipe = "q9_9";
  const std::string e = error_of(o);
  EXPECT_NE(e.find("unknown recipe"), std::string::npos) << e;
  EXPECT_NE(e.find("iq3_xxs"), std::string::npos) << e;  // lists the valid names
  o = synth_options();
  o.experts = 5;  // below top-k
  EXPECT_NE(error_of(o).find("strata bench: --synth: synth:"), std::string::npos) << error_of(o);
  Options file;
  file.model_path = "m.gguf";
  file.layers = 4;
  EXPECT_NE(error_of(file).find("only apply to --synth"), std::string::npos);
}

TEST(Options, Sizes) {
  Options o = synth_options();
  o.ctx = 0;
  EXPECT_NE(error_of(o).find("--ctx: expected >= 1"), std::string::npos);
  o = synth_options();
  o.gen = 0;
  EXPECT_NE(error_of(o).find("--gen"), std::string::npos);
  o = synth_options();
  o.sweep_ctx = {256, 0};
  EXPECT_NE(error_of(o).find("--sweep-ctx"), std::string::npos);
  o = synth_options();
  o.threads = -1;
  EXPECT_NE(error_of(o).find("--threads"), std::string::npos);
}

TEST(Options, WindowsNeedForcedAndAcceptancesInRange) {
  Options o = synth_options();
  o.window = 4;
  EXPECT_NE(error_of(o).find("needs --forced"), std::string::npos);
  o.forced = true;
  EXPECT_TRUE(validate(o).ok());
  o.accept = {0, 3};
  EXPECT_TRUE(validate(o).ok());
  o.accept = {4};
  EXPECT_NE(error_of(o).find("--accept: expected drafts accepted per window in 0..3"), std::string::npos) << error_of(o);
  o.accept = {};
  o.window = kMaxWindow + 1;
  EXPECT_NE(error_of(o).find("expected 1..8"), std::string::npos);
  o = synth_options();
  o.accept = {0};
  EXPECT_NE(error_of(o).find("only applies with --forced"), std::string::npos);
}

TEST(Options, SpecDraftsSourceAndConflicts) {
  Options o = synth_options();
  o.spec = 3;
  EXPECT_TRUE(validate(o).ok()) << error_of(o);
  for (const char* source : {"mtp", "lookup", "auto"}) {
    o.spec_source = source;
    EXPECT_TRUE(validate(o).ok()) << source << ": " << error_of(o);
  }
  o.spec = kMaxSpecDrafts;
  EXPECT_TRUE(validate(o).ok()) << error_of(o);
  o.spec = kMaxSpecDrafts + 1;
  EXPECT_NE(error_of(o).find("strata bench: --spec: expected 0..7 drafts per window (0 = off), got 8"),
            std::string::npos)
      << error_of(o);
  o.spec = -1;
  EXPECT_NE(error_of(o).find("--spec: expected 0..7"), std::string::npos) << error_of(o);
  o.spec = 2;
  o.spec_source = "ngram";
  EXPECT_NE(error_of(o).find("strata bench: --spec-source: expected mtp, lookup or auto, got 'ngram'"),
            std::string::npos)
      << error_of(o);
  o.spec = 0;
  o.spec_source = "lookup";
  EXPECT_NE(error_of(o).find("--spec-source: only applies with --spec N > 0"), std::string::npos) << error_of(o);
  // --forced fixes acceptances by pattern: no drafter runs, so the two cannot mix.
  o = synth_options();
  o.spec = 2;
  o.forced = true;
  EXPECT_NE(error_of(o).find("strata bench: --spec: cannot be combined with --forced"), std::string::npos)
      << error_of(o);
  o.window = 4;
  EXPECT_NE(error_of(o).find("cannot be combined with --forced"), std::string::npos) << error_of(o);
  o.forced = false;
  EXPECT_NE(error_of(o).find("strata bench: --window: only applies with --forced; with --spec 2"), std::string::npos)
      << error_of(o);
  if (cuda_built()) {
    o = synth_options();
    o.device = "cuda";
    o.spec = 2;
    EXPECT_TRUE(validate(o).ok()) << error_of(o);
    o.spec_source = "mtp";  // the CUDA decoder has the MTP head too
    EXPECT_TRUE(validate(o).ok()) << error_of(o);
  }
}

TEST(Options, AcceptSchedule) {
  EXPECT_EQ(accepted_drafts({}, 4, 0), 3);
  EXPECT_EQ(accepted_drafts({}, 1, 7), 0);
  const std::vector<int> schedule{1, 3, 0};
  EXPECT_EQ(accepted_drafts(schedule, 4, 0), 1);
  EXPECT_EQ(accepted_drafts(schedule, 4, 1), 3);
  EXPECT_EQ(accepted_drafts(schedule, 4, 5), 0);
}

TEST(Options, ParseIntList) {
  auto ok = parse_int_list("256,1024,4096", "--sweep-ctx", 1);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<int64_t>{256, 1024, 4096}));
  for (const char* bad : {"", "256,", "12x", "-3", "1,,2", "0"}) {
    auto r = parse_int_list(bad, "--sweep-ctx", 1);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find("strata bench: --sweep-ctx: expected comma-separated integers >= 1"), std::string::npos)
        << r.error();
  }
}

struct Proc {
  int rc = -1;
  std::string err;
};

Proc run_cli(const std::string& args) {
  Proc p;
  FILE* f = popen((std::string(STRATA_BINARY) + " bench " + args + " 2>&1 >/dev/null").c_str(), "r");
  if (!f) return p;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) p.err.append(buf, n);
  const int status = pclose(f);
  p.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return p;
}

TEST(OptionsCli, BadArgumentsExitTwoWithTheMessage) {
  if (!std::filesystem::exists(STRATA_BINARY)) GTEST_SKIP() << "strata binary not built: " << STRATA_BINARY;
  Proc p = run_cli("--synth q2_0 --device cuda --sweep-ctx 256,1024");
  EXPECT_EQ(p.rc, 2);
  EXPECT_NE(p.err.find(cuda_built() ? "only applies to --device cpu" : "not available in this build"),
            std::string::npos)
      << p.err;
  p = run_cli("--synth q2_0 --window-sweep 1,2 --forced");
  EXPECT_EQ(p.rc, 2);
  EXPECT_NE(p.err.find("--window-sweep"), std::string::npos) << p.err;
  p = run_cli("--synth q2_0 --window 3");
  EXPECT_EQ(p.rc, 2);
  EXPECT_NE(p.err.find("needs --forced"), std::string::npos) << p.err;
  p = run_cli("--synth q2_0 --spec 2 --forced");
  EXPECT_EQ(p.rc, 2);
  EXPECT_NE(p.err.find("--spec: cannot be combined with --forced"), std::string::npos) << p.err;
  p = run_cli("--synth q2_0 --spec 9");
  EXPECT_EQ(p.rc, 2);
  EXPECT_NE(p.err.find("--spec: expected 0..7"), std::string::npos) << p.err;
  p = run_cli("--synth q2_0 --spec-source lookup");
  EXPECT_EQ(p.rc, 2);
  EXPECT_NE(p.err.find("--spec-source: only applies with --spec"), std::string::npos) << p.err;
  p = run_cli("--synth q2_0 --sweep-ctx 1,x");
  EXPECT_EQ(p.rc, 2);
  EXPECT_NE(p.err.find("--sweep-ctx"), std::string::npos) << p.err;
  p = run_cli("--synth q2_0 --layers 0");
  EXPECT_EQ(p.rc, 2);
  EXPECT_NE(p.err.find("--layers: expected 1..48"), std::string::npos) << p.err;
  p = run_cli("-m /nonexistent/model.gguf --ctx 4 --gen 1 --bw-bytes 1048576 --bw-passes 1");
  EXPECT_EQ(p.rc, 1);
  EXPECT_NE(p.err.find("/nonexistent/model.gguf"), std::string::npos) << p.err;
}

}  // namespace
}  // namespace strata::bench
