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

void check(const json& root, const json& s, const json& v, const std::string& path,
           std::vector<std::string>& errs) {
  const std::string at = path.empty() ? "(root)" : path;
  if (!s.is_object()) {
    errs.push_back(at + ": schema is not an object");
    return;
  }
  for (const auto& [k, _] : s.items())
    if (!kKnown.count(k) && !kIgnored.count(k))
      errs.push_back(at + ": schema keyword '" + k + "' is not supported by this validator");
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"].get<std::string>();
    const std::string prefix = "#/definitions/";
    if (ref.rfind(prefix, 0) != 0 || !root.contains("definitions") ||
        !root["definitions"].contains(ref.substr(prefix.size()))) {
      errs.push_back(at + ": unresolvable $ref " + ref);
      return;
    }
    check(root, root["definitions"][ref.substr(prefix.size())], v, path, errs);
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const auto& sub : s["anyOf"]) {
      std::vector<std::string> e;
      check(root, sub, v, path, e);
      if (e.empty()) {
        any = true;
        break;
      }
    }
    if (!any) errs.push_back(at + ": matches none of anyOf");
  }
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_array()) {
      for (const auto& t : s["type"]) ok = ok || has_type(v, t.get<std::string>());
    } else {
      ok = has_type(v, s["type"].get<std::string>());
    }
    if (!ok) {
      errs.push_back(at + ": expected type " + s["type"].dump() + ", got " + v.type_name());
      return;
    }
  }
  if (s.contains("enum")) {
    bool ok = false;
    for (const auto& e : s["enum"]) ok = ok || e == v;
    if (!ok) errs.push_back(at + ": " + v.dump() + " not in enum " + s["enum"].dump());
  }
  if (s.contains("const") && s["const"] != v)
    errs.push_back(at + ": expected " + s["const"].dump() + ", got " + v.dump());
  if (v.is_number()) {
    if (s.contains("minimum") && v.get<double>() < s["minimum"].get<double>())
      errs.push_back(at + ": " + v.dump() + " < minimum " + s["minimum"].dump());
    if (s.contains("maximum") && v.get<double>() > s["maximum"].get<double>())
      errs.push_back(at + ": " + v.dump() + " > maximum " + s["maximum"].dump());
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const auto& k : s["required"])
        if (!v.contains(k.get<std::string>()))
          errs.push_back(at + ": missing required property '" + k.get<std::string>() + "'");
    const json props = s.value("properties", json::object());
    for (const auto& [k, sub] : v.items()) {
      if (props.contains(k)) {
        check(root, props[k], sub, path + "/" + k, errs);
      } else if (s.contains("additionalProperties")) {
        const auto& ap = s["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>())
          errs.push_back(at + ": unexpected property '" + k + "'");
        else if (ap.is_object())
          check(root, ap, sub, path + "/" + k, errs);
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<std::size_t>())
      errs.push_back(at + ": fewer than " + s["minItems"].dump() + " items");
    if (s.contains("items"))
      for (std::size_t i = 0; i < v.size(); ++i)
        check(root, s["items"], v[i], path + "/" + std::to_string(i), errs);
  }
}

std::vector<std::string> check_markup(std::string_view t, bool html) {
  static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "input", "link"};
  std::vector<std::string> errs;
  std::vector<std::string> stack;
  int roots = 0;
  std::size_t i = 0;
  auto line_of = [&](std::size_t p) {
    return std::to_string(1 + std::count(t.begin(), t.begin() + static_cast<long>(p), '\n'));
  };
  auto fail = [&](std::size_t p, const std::string& m) {
    if (errs.size() < 50) errs.push_back("line " + line_of(p) + ": " + m);
  };
  auto is_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == ':' || c == '_';
  };
  while (i < t.size()) {
    if (t[i] == '&') {
      const auto semi = t.find(';', i);
      const std::string ent(t.substr(i, semi == std::string_view::npos ? 1 : semi - i + 1));
      static const std::set<std::string> ok = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
      const bool numeric = ent.size() > 3 && ent[1] == '#';
      if (semi == std::string_view::npos || semi - i > 10 || (!ok.count(ent) && !numeric))
        fail(i, "bare or unknown entity '" + ent + "'");
      i = semi == std::string_view::npos ? i + 1 : semi + 1;
      continue;
    }
    if (t[i] != '<') {
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(t[i])))
        fail(i, "text outside the root element");
      ++i;
      continue;
    }
    if (t.substr(i, 4) == "<!--") {
      const auto e = t.find("-->", i + 4);
      if (e == std::string_view::npos) return fail(i, "unterminated comment"), errs;
      i = e + 3;
      continue;
    }
    if (t.substr(i, 2) == "<!" || t.substr(i, 2) == "<?") {
      if (!stack.empty() || roots) fail(i, "declaration inside the document");
      const auto e = t.find('>', i);
      if (e == std::string_view::npos) return fail(i, "unterminated declaration"), errs;
      i = e + 1;
      continue;
    }
    const bool closing = i + 1 < t.size() && t[i + 1] == '/';
    std::size_t p = i + (closing ? 2 : 1);
    const std::size_t ns = p;
    while (p < t.size() && is_name(t[p])) ++p;
    const std::string tag(t.substr(ns, p - ns));
    if (tag.empty()) {
      fail(i, "'<' not starting a tag");
      ++i;
      continue;
    }
    bool self_close = false;
    // Attributes: name="value" or name='value'.
    while (p < t.size() && t[p] != '>') {
      if (std::isspace(static_cast<unsigned char>(t[p]))) {
        ++p;
        continue;
      }
      if (t[p] == '/' && p + 1 < t.size() && t[p + 1] == '>') {
        self_close = true;
        ++p;
        break;
      }
      if (closing) {
        fail(p, "attributes on a closing tag");
        break;
      }
      const std::size_t an = p;
      while (p < t.size() && is_name(t[p])) ++p;
      const std::string attr(t.substr(an, p - an));
      if (attr.empty() || p >= t.size() || t[p] != '=' || p + 1 >= t.size() ||
          (t[p + 1] != '"' && t[p + 1] != '\'')) {
        fail(an, "malformed attribute in <" + tag + ">");
        break;
      }
      const char q = t[p + 1];
      const auto e = t.find(q, p + 2);
      if (e == std::string_view::npos) return fail(p, "unterminated attribute value"), errs;
      const std::string val(t.substr(p + 2, e - p - 2));
      if (val.find('<') != std::string::npos) fail(p, "'<' inside an attribute value");
      if ((attr == "src" || attr == "href") && val.find("://") != std::string::npos)
        fail(p,
             "external resource " + attr + "=\"" + val + "\" (the report must be self-contained)");
      p = e + 1;
    }
    if (p >= t.size()) return fail(i, "unterminated tag <" + tag + ">"), errs;
    i = p + 1;  // past '>'
    if (closing) {
      if (stack.empty() || stack.back() != tag) {
        fail(i, "closing </" + tag + "> does not match " +
                    (stack.empty() ? std::string("nothing") : "<" + stack.back() + ">"));
        if (!stack.empty()) stack.pop_back();
      } else {
        stack.pop_back();
      }
      continue;
    }
    if (stack.empty()) ++roots;
    if (self_close || (html && kVoid.count(tag))) continue;
    if (html && (tag == "style" || tag == "script")) {
      const std::string end = "</" + tag + ">";
      const auto e = t.find(end, i);
      if (e == std::string_view::npos) return fail(i, "unterminated <" + tag + ">"), errs;
      i = e + end.size();
      continue;
    }
    stack.push_back(tag);
  }
  if (!stack.empty()) fail(t.size(), "unclosed <" + stack.back() + "> at end of document");
  if (roots != 1) fail(t.size(), std::to_string(roots) + " root elements (expected 1)");
  return errs;
}

}  // namespace

std::vector<std::string> validate_schema(const json& schema, const json& doc) {
  std::vector<std::string> errs;
  check(schema, schema, doc, "", errs);
  return errs;
}

std::vector<std::string> check_html(std::string_view html) { return check_markup(html, true); }
std::vector<std::string> check_xml(std::string_view xml) { return check_markup(xml, false); }

}  // namespace ropecheck::reports
