// JSON, CSV and SVG writers on a hand-made Report: fields present and consistent, CSV header
// and rows, SVG well-formed (balanced tags, escaped text).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "strata/bench/report.h"

namespace strata::bench {
namespace {

RunResult make_run(int64_t ctx, double decode, double prefill, double bytes) {
  RunResult r;
  r.ctx = ctx;
  r.gen = 16;
  r.tokens_generated = 16;
  r.windows = 16;
  r.decode_tok_s = decode;
  r.prefill_tok_s = prefill;
  r.decode_s = 16 / decode;
  r.prefill_s = ctx / prefill;
  r.bytes_per_token = bytes;
  r.decode_bytes.dense = static_cast<uint64_t>(bytes * 16);
  r.window_s.assign(16, 1 / decode);
  r.decode_stages["head"] = {0.5, 16};
  r.prefill_stages["head"] = {2.0, 1};
  return r;
}

Report make_report() {
  Report rep;
  rep.timestamp = "2026-11-30T12:00:00Z";
  rep.command = "strata bench --synth iq3_xxs --forced --json 'a b.json'";
  rep.version = "0.1.0";
  rep.machine.cpu_model = "Acme \"Fast\" CPU, rev 2 <x> & y";
  rep.machine.cores = 2;
  rep.machine.threads = 2;
  rep.threads = 2;
  rep.model.source = "synth";
  rep.model.recipe = "iq3_xxs";
  rep.model.layers = 4;
  rep.model.experts = 512;
  rep.forced = true;
  rep.window = 1;
  rep.bandwidth.gb_s = 12.5;
  rep.bandwidth.passes_gb_s = {12.0, 12.5, 13.0};
  rep.peak_ram_bytes = 5'000'000'000;
  rep.runs = {make_run(256, 0.9, 4.0, 8.1e8), make_run(1024, 0.8, 3.5, 8.3e8)};
  for (RunResult& r : rep.runs) finish_run(r, rep.bandwidth.bytes_per_s());
  return rep;
}

TEST(Json, SchemaFieldsPresent) {
  const nlohmann::json j = nlohmann::json::parse(to_json(make_report()));
  for (const char* key : {"schema", "timestamp", "command", "version", "machine", "device", "engine", "threads", "model",
                          "recipe", "forced", "seed", "window", "accept", "bandwidth", "ctx", "gen", "decode_tok_s",
                          "prefill_tok_s", "bytes_per_token", "roof_fraction", "peak_ram_bytes", "peak_vram_bytes",
                          "runs", "notes", "spec"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* key : {"mode", "max_drafts", "source", "backend", "mtp_available", "windows", "drafted", "accepted",
                          "acceptance_rate", "accepted_per_window", "tokens_per_window", "tokens", "decode_tok_s",
                          "mtp", "lookup"}) {
    EXPECT_TRUE(j["spec"].contains(key)) << key;
  }
  EXPECT_TRUE(j["runs"][0].contains("spec"));
  for (const char* key : {"cpu_model", "cores", "threads", "llc_bytes", "ram_bytes"}) EXPECT_TRUE(j["machine"].contains(key)) << key;
  for (const char* key : {"ctx", "decode_tok_s", "prefill_tok_s", "bytes_per_token", "roof_fraction", "decode_bytes",
                          "stages", "window_s", "output_fnv1a"}) {
    EXPECT_TRUE(j["runs"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["schema"], kSchema);
  EXPECT_EQ(j["recipe"], "iq3_xxs");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["command"], make_report().command);
  EXPECT_EQ(j["accept"], nlohmann::json::array({0}));  // T = 1: the effective schedule
  EXPECT_EQ(j["machine"]["cpu_model"], make_report().machine.cpu_model);
}

TEST(Json, NumbersAreConsistent) {
  const nlohmann::json j = nlohmann::json::parse(to_json(make_report()));
  const double bw = j["bandwidth"]["gb_s"].get<double>() * 1e9;
  EXPECT_DOUBLE_EQ(j["bandwidth"]["bytes_per_s"].get<double>(), bw);
  const auto roof = [&](const nlohmann::json& r) {
    return r["decode_tok_s"].get<double>() * r["bytes_per_token"].get<double>() / bw;
  };
  EXPECT_NEAR(j["roof_fraction"].get<double>(), roof(j), 1e-12);
  for (const auto& r : j["runs"]) {
    EXPECT_NEAR(r["roof_fraction"].get<double>(), roof(r), 1e-12);
    EXPECT_EQ(r["decode_bytes"]["total"].get<double>(), r["bytes_per_token"].get<double>() * r["tokens_generated"].get<double>());
  }
  // The headline is the first run.
  EXPECT_EQ(j["ctx"], j["runs"][0]["ctx"]);
  EXPECT_EQ(j["decode_tok_s"], j["runs"][0]["decode_tok_s"]);
  EXPECT_EQ(j["runs"].size(), 2u);
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

TEST(Csv, HeaderAndOneRowPerRun) {
  const Report rep = make_report();
  const std::string csv = to_csv(rep);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = csv.find('\n', start)) != std::string::npos; start = nl + 1) lines.push_back(csv.substr(start, nl - start));
  ASSERT_EQ(lines.size(), 3u);
  const std::vector<std::string> header = split_csv_line(lines[0]);
  for (const char* col : {"timestamp", "device", "recipe", "ctx", "window", "prefill_tok_s", "decode_tok_s",
                          "bytes_per_token", "bandwidth_gb_s", "roof_fraction", "peak_ram_bytes", "peak_vram_bytes",
                          "cpu_model", "command"}) {
    EXPECT_NE(std::find(header.begin(), header.end(), col), header.end()) << col;
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> row = split_csv_line(lines[i]);
    ASSERT_EQ(row.size(), header.size()) << lines[i];
    const auto col = [&](const char* name) { return row[std::find(header.begin(), header.end(), name) - header.begin()]; };
    EXPECT_EQ(col("ctx"), std::to_string(rep.runs[i - 1].ctx));
    EXPECT_EQ(col("cpu_model"), rep.machine.cpu_model);  // quoted and unquoted back
    EXPECT_EQ(col("command"), rep.command);
    EXPECT_NEAR(std::stod(col("roof_fraction")), rep.runs[i - 1].roof_fraction, 1e-9);
  }
}

// A minimal XML well-formedness check: balanced tags, quoted attributes, no raw '<' or
// unknown entity in text.
bool well_formed(const std::string& xml, std::string& why) {
  std::vector<std::string> stack;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      const size_t semi = xml.find(';', i);
      const std::string ent = semi == std::string::npos ? "" : xml.substr(i, semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;") {
        why = "bad entity at " + std::to_string(i);
        return false;
      }
      i = semi + 1;
      continue;
    }
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    if (xml.compare(i, 2, "<?") == 0) {
      i = xml.find("?>", i) + 2;
      continue;
    }
    size_t j = i + 1;
    char quote = 0;
    for (; j < xml.size(); ++j) {
      if (quote) {
        if (xml[j] == quote) quote = 0;
        else if (xml[j] == '<') { why = "raw < in attribute"; return false; }
      } else if (xml[j] == '"' || xml[j] == '\'') {
        quote = xml[j];
      } else if (xml[j] == '>') {
        break;
      }
    }
    if (j >= xml.size()) { why = "unterminated tag"; return false; }
    const std::string tag = xml.substr(i + 1, j - i - 1);
    const bool closing = !tag.empty() && tag[0] == '/', self = !tag.empty() && tag.back() == '/';
    const std::string name = tag.substr(closing ? 1 : 0, tag.find_first_of(" \n/", closing ? 1 : 0) - (closing ? 1 : 0));
    if (closing) {
      if (stack.empty() || stack.back() != name) { why = "mismatched </" + name + ">"; return false; }
      stack.pop_back();
    } else if (!self) {
      stack.push_back(name);
    }
    i = j + 1;
  }
  if (!stack.empty()) why = "unclosed <" + stack.back() + ">";
  return stack.empty();
}

TEST(Svg, SweepPlotIsWellFormed) {
  const std::string svg = to_svg(sweep_plot(make_report()));
  std::string why;
  EXPECT_TRUE(well_formed(svg, why)) << why;
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("decode tok/s"), std::string::npos);
  EXPECT_NE(svg.find("prefill tok/s"), std::string::npos);
  EXPECT_NE(svg.find("&quot;Fast&quot;"), std::string::npos);  // the CPU name, escaped
  size_t circles = 0;
  for (size_t p = 0; (p = svg.find("<circle", p)) != std::string::npos; ++p) ++circles;
  EXPECT_EQ(circles, 4u);  // two runs x two panels
}

TEST(Svg, EdgeCasesStayWellFormed) {
  std::string why;
  Plot empty;
  EXPECT_TRUE(well_formed(to_svg(empty), why)) << why;
  Plot one{"a & b", "x", {256}, {{"s", "red", {0.0}}}};
  EXPECT_TRUE(well_formed(to_svg(one), why)) << why;
  Plot nan{"t", "x", {1, 2}, {{"s", "red", {std::nan(""), 1.0}}}};
  EXPECT_TRUE(well_formed(to_svg(nan), why)) << why;
}

TEST(Table, MentionsTheHeadlineNumbers) {
  const std::string t = to_table(make_report());
  EXPECT_NE(t.find("read roof 12.50 GB/s"), std::string::npos) << t;
  EXPECT_NE(t.find("0.9000"), std::string::npos) << t;  // decode tok/s of ctx 256
  EXPECT_NE(t.find("1024"), std::string::npos) << t;
}

TEST(Bandwidth, Median) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
}

TEST(Bandwidth, BufferSizing) {
  BandwidthOptions o;
  o.llc_bytes = 105ull << 20;
  EXPECT_EQ(probe_buffer_bytes(o), 420ull << 20);
  o.llc_bytes = 8ull << 20;
  EXPECT_EQ(probe_buffer_bytes(o), 256ull << 20);  // at least 256 MiB
  o.bytes = (1ull << 20) + 5;
  EXPECT_EQ(probe_buffer_bytes(o), 1ull << 20);  // page multiple
}

TEST(Bandwidth, SmallProbeReportsEveryPass) {
  BandwidthOptions o;
  o.bytes = 4ull << 20;
  o.passes = 3;
  o.threads = 2;
  auto bw = measure_host_bandwidth(o);
  ASSERT_TRUE(bw.ok()) << bw.error();
  EXPECT_EQ(bw->passes_gb_s.size(), 3u);
  EXPECT_EQ(bw->threads, 2);
  EXPECT_GT(bw->gb_s, 0.0);  // a value exists; its size is the machine's business
  EXPECT_DOUBLE_EQ(bw->gb_s, median(bw->passes_gb_s));
}

}  // namespace
}  // namespace strata::bench
