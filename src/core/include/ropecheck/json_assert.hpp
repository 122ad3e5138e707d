// Force-included into every C++ translation unit (top-level CMakeLists.txt).
//
// nlohmann::json checks its preconditions (const operator[] on a missing key, front() of an empty
// array, dereferencing end(), ...) with assert(), which NDEBUG compiles out: a missing key is then
// read through end() of the underlying std::map, i.e. whatever heap bytes lie next to it. That was
// report_unit's intermittent SIGSEGV (TSan: heap-use-after-free in render_html of a report with a
// key removed). Here a violated precondition throws in every build type, so a malformed document
// is an error the CLI reports, never a wild read. Defined before any nlohmann header is seen.
#pragma once
#ifdef __cplusplus
#include <stdexcept>
#include <string>
#ifndef JSON_ASSERT
// A function, not a throw-expression in the macro: a few nlohmann functions that assert are
// noexcept (there a violated precondition terminates, which beats a wild read) and GCC would warn
// (-Wterminate) at each of them.
[[noreturn]] inline void ropecheck_json_precondition_failed(const char* what) {
  throw std::logic_error(std::string("nlohmann::json precondition violated: ") + what +
                         " (missing key or index out of range)");
}
#define JSON_ASSERT(x) ((x) ? static_cast<void>(0) : ropecheck_json_precondition_failed(#x))
#endif
#endif
