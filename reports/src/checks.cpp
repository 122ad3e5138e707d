// Validators used by the report tests, kept in the library so they need no GTest and no Python:
// a JSON Schema validator for the subset report.schema.json uses, and an XML-style
// well-formedness checker for the HTML and JUnit we emit.
#include "ropecheck/reports/report.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace ropecheck::reports {

using nlohmann::json;

namespace {

bool has_type(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_number_integer();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return false;
}

const std::set<std::string> kIgnored = {"$schema",     "$id",         "title",
                                        "description", "definitions", "$comment"};
const std::set<std::string> kKnown = {"type",    "properties", "required", "additionalProperties",
                                      "items",   "enum",       "const",    "minimum",
                                      "maximum", "minItems",   "$ref",     "anyOf"};

// One validation pass: each keyword group in its own function, errors appended to errs.
struct SchemaCheck {
  const json& root;
  std::vector<std::string>& errs;

  void check(const json& s, const json& v, const std::string& path) {
    const std::string at = path.empty() ? "(root)" : path;
    if (!s.is_object()) {
      errs.push_back(at + ": schema is not an object");
      return;
    }
    for (const auto& [k, _] : s.items())
      if (!kKnown.count(k) && !kIgnored.count(k))
        errs.push_back(at + ": schema keyword '" + k + "' is not supported by this validator");
    if (s.contains("$ref") && !ref(s["$ref"].get<std::string>(), v, path, at)) return;
    if (s.contains("anyOf")) any_of(s["anyOf"], v, path, at);
    if (s.contains("type") && !type(s["type"], v, at)) return;
    values(s, v, at);
    if (v.is_object()) object(s, v, path, at);
    if (v.is_array()) array(s, v, path, at);
  }

  // False when the reference does not resolve (nothing more is checked).
  bool ref(const std::string& r, const json& v, const std::string& path, const std::string& at) {
    const std::string prefix = "#/definitions/";
    if (r.rfind(prefix, 0) != 0 || !root.contains("definitions") ||
        !root["definitions"].contains(r.substr(prefix.size()))) {
      errs.push_back(at + ": unresolvable $ref " + r);
      return false;
    }
    check(root["definitions"][r.substr(prefix.size())], v, path);
    return true;
  }

  void any_of(const json& subs, const json& v, const std::string& path, const std::string& at) {
    for (const auto& sub : subs) {
      std::vector<std::string> e;
      SchemaCheck{root, e}.check(sub, v, path);
      if (e.empty()) return;
    }
    errs.push_back(at + ": matches none of anyOf");
  }

  // False on a type mismatch (nothing more is checked).
  bool type(const json& t, const json& v, const std::string& at) {
    bool ok = false;
    if (t.is_array()) {
      for (const auto& x : t) ok = ok || has_type(v, x.get<std::string>());
    } else {
      ok = has_type(v, t.get<std::string>());
    }
    if (!ok) errs.push_back(at + ": expected type " + t.dump() + ", got " + v.type_name());
    return ok;
  }

  // enum, const, minimum, maximum.
  void values(const json& s, const json& v, const std::string& at) {
    if (s.contains("enum")) {
      bool ok = false;
      for (const auto& e : s["enum"]) ok = ok || e == v;
      if (!ok) errs.push_back(at + ": " + v.dump() + " not in enum " + s["enum"].dump());
    }
    if (s.contains("const") && s["const"] != v)
      errs.push_back(at + ": expected " + s["const"].dump() + ", got " + v.dump());
    if (!v.is_number()) return;
    if (s.contains("minimum") && v.get<double>() < s["minimum"].get<double>())
      errs.push_back(at + ": " + v.dump() + " < minimum " + s["minimum"].dump());
    if (s.contains("maximum") && v.get<double>() > s["maximum"].get<double>())
      errs.push_back(at + ": " + v.dump() + " > maximum " + s["maximum"].dump());
  }

  void object(const json& s, const json& v, const std::string& path, const std::string& at) {
    if (s.contains("required"))
      for (const auto& k : s["required"])
        if (!v.contains(k.get<std::string>()))
          errs.push_back(at + ": missing required property '" + k.get<std::string>() + "'");
    const json props = s.value("properties", json::object());
    for (const auto& [k, sub] : v.items()) {
      if (props.contains(k)) {
        check(props[k], sub, path + "/" + k);
      } else if (s.contains("additionalProperties")) {
        const auto& ap = s["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>())
          errs.push_back(at + ": unexpected property '" + k + "'");
        else if (ap.is_object())
          check(ap, sub, path + "/" + k);
      }
    }
  }

  void array(const json& s, const json& v, const std::string& path, const std::string& at) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<std::size_t>())
      errs.push_back(at + ": fewer than " + s["minItems"].dump() + " items");
    if (s.contains("items"))
      for (std::size_t i = 0; i < v.size(); ++i)
        check(s["items"], v[i], path + "/" + std::to_string(i));
  }
};

bool is_name(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == ':' || c == '_';
}

// XML-style well-formedness of one document, one construct per method. A method returns false
// when the document cannot be read further (an unterminated construct): the end-of-document
// checks are then skipped.
class Markup {
 public:
  Markup(std::string_view t, bool html) : t_(t), html_(html) {}

  std::vector<std::string> run() {
    while (i_ < t_.size()) {
      if (t_[i_] == '&') {
        entity();
      } else if (t_[i_] != '<') {
        if (stack_.empty() && !std::isspace(static_cast<unsigned char>(t_[i_])))
          fail(i_, "text outside the root element");
        ++i_;
      } else if (t_.substr(i_, 4) == "<!--") {
        if (!skip_to(i_ + 4, "-->", "unterminated comment")) return errs_;
      } else if (t_.substr(i_, 2) == "<!" || t_.substr(i_, 2) == "<?") {
        if (!stack_.empty() || roots_) fail(i_, "declaration inside the document");
        if (!skip_to(i_, ">", "unterminated declaration")) return errs_;
      } else if (!tag()) {
        return errs_;
      }
    }
    if (!stack_.empty()) fail(t_.size(), "unclosed <" + stack_.back() + "> at end of document");
    if (roots_ != 1) fail(t_.size(), std::to_string(roots_) + " root elements (expected 1)");
    return errs_;
  }

 private:
  void fail(std::size_t p, const std::string& m) {
    const auto line = 1 + std::count(t_.begin(), t_.begin() + static_cast<long>(p), '\n');
    if (errs_.size() < 50) errs_.push_back("line " + std::to_string(line) + ": " + m);
  }

  // Moves past the next `end` searched from `from`; false (with `what`) when there is none.
  bool skip_to(std::size_t from, std::string_view end, const char* what) {
    const auto e = t_.find(end, from);
    if (e == std::string_view::npos) return fail(i_, what), false;
    i_ = e + end.size();
    return true;
  }

  void entity() {
    const auto semi = t_.find(';', i_);
    const std::string ent(t_.substr(i_, semi == std::string_view::npos ? 1 : semi - i_ + 1));
    static const std::set<std::string> ok = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    const bool numeric = ent.size() > 3 && ent[1] == '#';
    if (semi == std::string_view::npos || semi - i_ > 10 || (!ok.count(ent) && !numeric))
      fail(i_, "bare or unknown entity '" + ent + "'");
    i_ = semi == std::string_view::npos ? i_ + 1 : semi + 1;
  }

  // Attributes name="value" or name='value' from p up to '>' or "/>"; p ends on the '>'.
  // False when a value is unterminated.
  bool attributes(std::size_t& p, const std::string& tag, bool closing, bool& self_close) {
    while (p < t_.size() && t_[p] != '>') {
      if (std::isspace(static_cast<unsigned char>(t_[p]))) {
        ++p;
        continue;
      }
      if (t_[p] == '/' && p + 1 < t_.size() && t_[p + 1] == '>') {
        self_close = true;
        ++p;
        return true;
      }
      if (closing) return fail(p, "attributes on a closing tag"), true;
      const std::size_t an = p;
      while (p < t_.size() && is_name(t_[p])) ++p;
      const std::string attr(t_.substr(an, p - an));
      if (attr.empty() || p >= t_.size() || t_[p] != '=' || p + 1 >= t_.size() ||
          (t_[p + 1] != '"' && t_[p + 1] != '\''))
        return fail(an, "malformed attribute in <" + tag + ">"), true;
      const auto e = t_.find(t_[p + 1], p + 2);
      if (e == std::string_view::npos) return fail(p, "unterminated attribute value"), false;
      const std::string val(t_.substr(p + 2, e - p - 2));
      if (val.find('<') != std::string::npos) fail(p, "'<' inside an attribute value");
      if ((attr == "src" || attr == "href") && val.find("://") != std::string::npos)
        fail(p,
             "external resource " + attr + "=\"" + val + "\" (the report must be self-contained)");
      p = e + 1;
    }
    return true;
  }

  // An opening or closing tag at i_.
  bool tag() {
    const bool closing = i_ + 1 < t_.size() && t_[i_ + 1] == '/';
    std::size_t p = i_ + (closing ? 2 : 1);
    const std::size_t ns = p;
    while (p < t_.size() && is_name(t_[p])) ++p;
    const std::string tag(t_.substr(ns, p - ns));
    if (tag.empty()) {
      fail(i_, "'<' not starting a tag");
      ++i_;
      return true;
    }
    bool self_close = false;
    if (!attributes(p, tag, closing, self_close)) return false;
    if (p >= t_.size()) return fail(i_, "unterminated tag <" + tag + ">"), false;
    i_ = p + 1;  // past '>'
    if (closing) {
      close(tag);
      return true;
    }
    if (stack_.empty()) ++roots_;
    static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "input", "link"};
    if (self_close || (html_ && kVoid.count(tag))) return true;
    if (html_ && (tag == "style" || tag == "script"))
      return skip_to(i_, "</" + tag + ">", ("unterminated <" + tag + ">").c_str());
    stack_.push_back(tag);
    return true;
  }

  void close(const std::string& tag) {
    if (stack_.empty() || stack_.back() != tag) {
      fail(i_, "closing </" + tag + "> does not match " +
                   (stack_.empty() ? std::string("nothing") : "<" + stack_.back() + ">"));
      if (!stack_.empty()) stack_.pop_back();
    } else {
      stack_.pop_back();
    }
  }

  std::string_view t_;
  bool html_;
  std::vector<std::string> errs_;
  std::vector<std::string> stack_;
  int roots_ = 0;
  std::size_t i_ = 0;
};

std::vector<std::string> check_markup(std::string_view t, bool html) {
  return Markup(t, html).run();
}

}  // namespace

std::vector<std::string> validate_schema(const json& schema, const json& doc) {
  std::vector<std::string> errs;
  SchemaCheck{schema, errs}.check(schema, doc, "");
  return errs;
}

std::vector<std::string> check_html(std::string_view html) { return check_markup(html, true); }
std::vector<std::string> check_xml(std::string_view xml) { return check_markup(xml, false); }

}  // namespace ropecheck::reports
