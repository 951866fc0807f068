// Test helpers for the GGUF suites: a scratch directory, whole-file read/write, running the
// strata binary, and RawGguf, a byte-level builder that can express malformed files the
// library's Writer refuses to produce (duplicate keys, bad types, wrong offsets...).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "strata/gguf/gguf.h"

namespace strata::gguf::testing {

inline std::string sample_path(const std::string& name) {
  return std::string(STRATA_TEST_DATA) + "/gguf-samples/" + name;
}

// A fresh directory per test, removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "gguf";
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = std::filesystem::temp_directory_path() / ("strata-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `strata <args>` (the binary under test), capturing stdout and stderr.
inline CliResult run_strata(const std::string& args, const std::string& scratch_prefix) {
  std::string out_path = scratch_prefix + ".stdout", err_path = scratch_prefix + ".stderr";
  std::string cmd = std::string("'") + STRATA_BINARY + "' " + args + " >'" + out_path + "' 2>'" + err_path + "'";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto out = read_bytes(out_path), err = read_bytes(err_path);
  r.out.assign(out.begin(), out.end());
  r.err.assign(err.begin(), err.end());
  return r;
}

// Little-endian byte appends.
class Bytes {
 public:
  template <class T>
  Bytes& put(T x) {
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    data.insert(data.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  std::vector<uint8_t> data;
};

struct RawKv {
  std::string key;
  uint32_t type = 0;
  std::vector<uint8_t> payload;  // the encoded value, after the type code
};

struct RawTensor {
  std::string name;
  std::vector<uint64_t> ne;  // n_dims = ne.size() unless n_dims_override
  uint32_t type = 0;
  uint64_t offset = 0;
  int64_t n_dims_override = -1;
};

// A GGUF file described field by field; build() lays it out exactly as written here.
struct RawGguf {
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  int64_t tensor_count_override = -1;  // else tensors.size()
  int64_t kv_count_override = -1;      // else kvs.size()
  std::vector<RawKv> kvs;
  std::vector<RawTensor> tensors;
  uint32_t alignment = 32;       // used to pad before the data section
  uint64_t data_bytes = 0;       // zero bytes in the data section

  RawGguf& kv(const std::string& key, uint32_t type, std::vector<uint8_t> payload) {
    kvs.push_back({key, type, std::move(payload)});
    return *this;
  }
  template <class T>
  RawGguf& kv_scalar(const std::string& key, uint32_t type, T value) {
    return kv(key, type, Bytes().put<T>(value).data);
  }
  RawGguf& kv_str(const std::string& key, const std::string& value) { return kv(key, 8, Bytes().str(value).data); }

  std::vector<uint8_t> build() const {
    Bytes b;
    b.put<uint32_t>(magic).put<uint32_t>(version);
    b.put<uint64_t>(tensor_count_override >= 0 ? static_cast<uint64_t>(tensor_count_override) : tensors.size());
    b.put<uint64_t>(kv_count_override >= 0 ? static_cast<uint64_t>(kv_count_override) : kvs.size());
    for (const RawKv& kv : kvs) {
      b.str(kv.key).put<uint32_t>(kv.type);
      b.data.insert(b.data.end(), kv.payload.begin(), kv.payload.end());
    }
    for (const RawTensor& t : tensors) {
      b.str(t.name);
      b.put<uint32_t>(t.n_dims_override >= 0 ? static_cast<uint32_t>(t.n_dims_override)
                                             : static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) b.put<uint64_t>(d);
      b.put<uint32_t>(t.type).put<uint64_t>(t.offset);
    }
    while (b.data.size() % alignment != 0) b.data.push_back(0);
    b.data.resize(b.data.size() + data_bytes, 0);
    return b.data;
  }
};

// A small valid file: a few keys and three tensors at the strict running offsets.
//   a.weight  f32  [8, 4]   128 bytes at 0
//   b.weight  q8_0 [64, 2]  136 bytes at 128 (padded to 160)
//   c.weight  f16  [16]     32 bytes at 288
inline RawGguf valid_raw() {
  RawGguf g;
  g.kv_str("general.architecture", "test");
  g.kv_scalar<uint32_t>("general.quantization_version", 4, 2);
  g.tensors.push_back({"a.weight", {8, 4}, 0, 0});
  g.tensors.push_back({"b.weight", {64, 2}, 8, 128});
  g.tensors.push_back({"c.weight", {16}, 1, 288});
  g.data_bytes = 320;
  return g;
}

}  // namespace strata::gguf::testing

namespace strata::gguf::testing {

template <class T>
void patch(std::vector<uint8_t>& bytes, size_t offset, T value) {
  ASSERT_LE(offset + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// One malformed input: make() writes it under dir and returns the path to open. The error
// must name `names_file` (default: the opened path) and contain every string in `expect`.
struct Corruption {
  std::string name;
  std::function<std::string(const ScratchDir&)> make;
  std::vector<std::string> expect;
  std::string names_file;  // a file name under the scratch dir, when not the opened one
};

inline std::string case_name(const ::testing::TestParamInfo<Corruption>& info) { return info.param.name; }

// The library rejects it with a message naming the file and the item; `strata inspect`
// exits non-zero with the same message on stderr.
inline void expect_rejected(const Corruption& c) {
  ScratchDir dir;
  std::string path = c.make(dir);
  std::string file = c.names_file.empty() ? path : dir.file(c.names_file);
  auto model = Model::open(path);
  ASSERT_FALSE(model.ok()) << c.name << ": accepted";
  const std::string& msg = model.error();
  ::testing::Test::RecordProperty("message", msg);
  EXPECT_EQ(msg.rfind("gguf", 0), 0u) << msg;
  EXPECT_NE(msg.find(file), std::string::npos) << "does not name " << file << ": " << msg;
  for (const std::string& part : c.expect) EXPECT_NE(msg.find(part), std::string::npos) << "want '" << part << "' in: " << msg;

  CliResult cli = run_strata("inspect '" + path + "'", dir.file("cli"));
  // Exactly the message: anything more (a sanitizer report, a crash) is a failure.
  EXPECT_EQ(cli.exit_code, 1) << cli.out;
  EXPECT_EQ(cli.err, "strata inspect: " + msg + "\n");
}

}  // namespace strata::gguf::testing
