// function_sizes: lists the functions of C/C++ source trees longer than a limit and exits 1 when
// one is over it (the `function_sizes` test, label layering: "no function you cannot read on one
// screen"). Tests, fuzz targets, benchmarks and examples are skipped (a test body may be a long
// table of cases); a data table is exempt when the three lines above its opening brace say
// "data table" in a comment.
//
//   function_sizes [--limit N] [--list M] DIR...    (default limit 100; --list prints every
//                                                   function over M lines as well)
//
// The parser is a heuristic, deliberately small: comments, string and character literals and
// preprocessor lines are blanked; a '{' at namespace or class scope whose preceding code ends in
// ')' (optionally followed by const / noexcept / override / final / a trailing return type), and
// is not a control statement, opens a function; lambdas and local classes count toward the
// enclosing function. Length = lines from the opening to the closing brace, both included.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Function {
  long lines;
  std::string file;
  long first_line;
  std::string name;
};

// Comments, literals and preprocessor lines replaced by spaces (newlines kept).
std::string blank(const std::string& src) {
  std::string out = src;
  const std::size_t n = src.size();
  auto wipe = [&](std::size_t a, std::size_t b) {
    for (std::size_t k = a; k < b && k < n; ++k)
      if (out[k] != '\n') out[k] = ' ';
  };
  std::size_t i = 0;
  bool line_start = true;
  while (i < n) {
    const char c = src[i];
    if (line_start && c == '#') {  // preprocessor line (with continuations)
      std::size_t j = i;
      while (j < n && !(src[j] == '\n' && src[j - 1] != '\\')) ++j;
      wipe(i, j);
      i = j;
    } else if (src.compare(i, 2, "//") == 0) {
      const std::size_t j = std::min(src.find('\n', i), n);
      wipe(i, j);
      i = j;
    } else if (src.compare(i, 2, "/*") == 0) {
      const std::size_t e = src.find("*/", i + 2);
      const std::size_t j = e == std::string::npos ? n : e + 2;
      wipe(i, j);
      i = j;
    } else if (src.compare(i, 2, "R\"") == 0) {
      const std::size_t p = src.find('(', i);
      const std::string close = ")" + src.substr(i + 2, p - i - 2) + "\"";
      const std::size_t e = src.find(close, p);
      const std::size_t j = e == std::string::npos ? n : e + close.size();
      wipe(i, j);
      i = j;
    } else if (c == '"' || (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(
                                                        src[i - 1]))))) {  // 1'000 separators
      std::size_t j = i + 1;
      while (j < n && src[j] != c && src[j] != '\n') j += src[j] == '\\' ? 2 : 1;
      wipe(i + 1, j);
      i = j + 1;
    } else {
      ++i;
    }
    if (i > 0 && i <= n) line_start = src[i - 1] == '\n' || (line_start && (c == ' ' || c == '\t'));
  }
  return out;
}

std::string squeeze(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!o.empty() && o.back() != ' ') o += ' ';
    } else {
      o += c;
    }
  }
  while (!o.empty() && o.back() == ' ') o.pop_back();
  return o;
}

bool opens_function(const std::string& head) {
  static const std::regex qualifiers(
      R"(\)\s*((const|noexcept(\([^)]*\))?|override|final|mutable)\s*)*(->\s*[\w:<>,\s\*&]+)?$)");
  static const std::regex control(R"(\b(if|for|while|switch|catch)\s*\(.*\)$)");
  static const std::regex ctor_init(R"(\)\s*(noexcept\s*)?:\s*[\w:]+\s*\(.*\)$)");
  return (std::regex_search(head, qualifiers) || std::regex_search(head, ctor_init)) &&
         !std::regex_search(head, control);
}

std::string function_name(const std::string& head) {
  static const std::regex name(R"(([~\w:]+)\s*\()");
  std::smatch m;
  return std::regex_search(head, m, name) ? m[1].str() : head.substr(0, 40);
}

std::vector<Function> functions(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string raw = ss.str(), s = blank(raw);
  std::vector<long> line_of(s.size() + 1, 1);
  for (std::size_t k = 0; k < s.size(); ++k) line_of[k + 1] = line_of[k] + (s[k] == '\n');
  std::vector<std::string> raw_lines;
  std::istringstream r(raw);
  for (std::string l; std::getline(r, l);) raw_lines.push_back(l);
  struct Open {
    bool function;
    std::size_t at;
    std::string name;
  };
  std::vector<Open> stack;
  std::vector<Function> out;
  std::size_t last = 0;
  int in_function = 0;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    if (c == ';') {
      last = k + 1;
    } else if (c == '{') {
      bool f = false;
      std::string nm;
      if (in_function == 0) {
        const std::string head = squeeze(s.substr(last, k - last));
        f = opens_function(head);
        if (f) nm = function_name(head);
      }
      stack.push_back({f, k, nm});
      in_function += f;
      last = k + 1;
    } else if (c == '}') {
      if (!stack.empty()) {
        const Open o = stack.back();
        stack.pop_back();
        if (o.function) {
          --in_function;
          const long first = line_of[o.at], lines = line_of[k] - first + 1;
          bool table = false;
          for (long l = std::max(1L, first - 3); l <= first; ++l)
            table = table || raw_lines[static_cast<std::size_t>(l - 1)].find("data table") !=
                                 std::string::npos;
          if (!table) out.push_back({lines, file.string(), first, o.name});
        }
      }
      last = k + 1;
    }
  }
  return out;
}

bool skipped(const fs::path& p) {
  for (const auto& part : p)
    if (part == "tests" || part == "fuzz" || part == "bench" || part == "examples") return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  long limit = 100, list = -1;
  std::vector<fs::path> roots;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--limit" || a == "--list") && i + 1 < argc)
      (a == "--limit" ? limit : list) = std::atol(argv[++i]);
    else
      roots.emplace_back(a);
  }
  if (roots.empty()) {
    std::cerr << "usage: function_sizes [--limit N] [--list M] DIR...\n";
    return 2;
  }
  std::vector<Function> all;
  std::size_t files = 0;
  for (const auto& r : roots) {
    if (!fs::exists(r)) {
      std::cerr << "function_sizes: no such directory: " << r << "\n";
      return 2;
    }
    for (const auto& e : fs::recursive_directory_iterator(r)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || skipped(fs::relative(e.path(), r))) continue;
      if (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".c") continue;
      ++files;
      for (auto& f : functions(e.path())) all.push_back(std::move(f));
    }
  }
  std::sort(all.begin(), all.end(), [](const Function& a, const Function& b) {
    return a.lines != b.lines ? a.lines > b.lines : a.file < b.file;
  });
  long over = 0, over_list = 0;
  for (const auto& f : all) {
    if (f.lines > limit) ++over;
    if (list >= 0 && f.lines > list) ++over_list;
    if (f.lines > limit || (list >= 0 && f.lines > list))
      std::cout << f.lines << " " << f.file << ":" << f.first_line << " " << f.name << "\n";
  }
  std::cout << "function_sizes: " << all.size() << " functions in " << files << " files; " << over
            << " over " << limit << " lines";
  if (list >= 0) std::cout << ", " << over_list << " over " << list;
  std::cout << "\n";
  return over > 0 ? 1 : 0;
}
