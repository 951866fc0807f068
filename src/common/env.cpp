#include "strata/common/env.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace strata {

Result<std::optional<int>> parse_env_int(const char* name, const char* text, int lo, int hi) {
  if (text == nullptr) return std::optional<int>{};
  errno = 0;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  // strtol skips leading blanks; a value is digits with an optional sign and nothing else.
  const bool whole = end != text && *end == '\0' && text[0] != ' ' && text[0] != '\t';
  if (!whole || errno == ERANGE || n < lo || n > hi)
    return Status::error(std::string(name) + ": expected an integer in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "], got \"" + text + "\"");
  return std::optional<int>{static_cast<int>(n)};
}

}  // namespace strata
