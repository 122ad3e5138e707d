// Spec (RopeSpec) and Policy for Python. Keyword names follow `ropecheck check`'s spec keys, so a
// spec reads the same in a safetensors __metadata__, a --spec JSON and Python. repr() of either
// is the Python call that rebuilds it (eval(repr(x)) == x): validate()'s replay lines print them.
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "binding.hpp"
#include "ropecheck/hf_config.hpp"

namespace ropecheck::python {

namespace {

template <class T>
T parse_or_throw(const std::optional<T>& v, const std::string& what, const std::string& text) {
  if (!v) throw py::value_error(what + ": unknown value '" + text + "'");
  return *v;
}

// Each scaling parameter by name: how to set it from a Python value, how to read it back.
struct ScalingField {
  std::function<void(Scaling&, const py::handle&)> set;
  std::function<py::object(const Scaling&)> get;
};

template <class T>
ScalingField field(T Scaling::*member) {
  return {[member](Scaling& s, const py::handle& v) { s.*member = v.cast<T>(); },
          [member](const Scaling& s) { return py::cast(s.*member); }};
}

// data table, in the order repr() prints them
const std::vector<std::pair<std::string, ScalingField>>& scaling_fields() {
  static const std::vector<std::pair<std::string, ScalingField>> f = {
      {"factor", field(&Scaling::factor)},
      {"original_max_position_embeddings", field(&Scaling::original_max_position_embeddings)},
      {"max_position_embeddings", field(&Scaling::max_position_embeddings)},
      {"seq_len", field(&Scaling::seq_len)},
      {"beta_fast", field(&Scaling::beta_fast)},
      {"beta_slow", field(&Scaling::beta_slow)},
      {"truncate", field(&Scaling::truncate)},
      {"mscale", field(&Scaling::mscale)},
      {"mscale_all_dim", field(&Scaling::mscale_all_dim)},
      {"attention_factor", field(&Scaling::attention_factor)},
      {"low_freq_factor", field(&Scaling::low_freq_factor)},
      {"high_freq_factor", field(&Scaling::high_freq_factor)},
      {"short_factor", field(&Scaling::short_factor)},
      {"long_factor", field(&Scaling::long_factor)},
      {"freq_factors", field(&Scaling::freq_factors)},
  };
  return f;
}

const ScalingField* find_field(const std::string& key) {
  for (const auto& [k, f] : scaling_fields())
    if (k == key) return &f;
  return nullptr;
}

// A Python literal of a parameter value: floats as repr() prints them (shortest round trip),
// float('inf') and float('nan') for the non-finite; lists element by element.
std::string literal(const py::handle& v) {
  if (py::isinstance<py::float_>(v)) {
    const double d = v.cast<double>();
    if (std::isnan(d)) return "float('nan')";
    if (std::isinf(d)) return d > 0 ? "float('inf')" : "float('-inf')";
  }
  if (py::isinstance<py::list>(v)) {
    std::string out = "[";
    for (auto e : v.cast<py::list>()) out += (out.size() > 1 ? ", " : "") + literal(e);
    return out + "]";
  }
  return py::repr(v).cast<std::string>();
}

// Python that rebuilds the spec (eval(repr(s)) == s): every field, the scaling parameters that
// differ from their defaults. validate()'s replay lines and check()'s report print it.
std::string spec_repr(const RopeSpec& s) {
  std::string o = "Spec(head_dim=" + std::to_string(s.head_dim) +
                  ", rotary_dim=" + std::to_string(s.rotary_dim) +
                  ", base=" + literal(py::float_(s.base)) + ", layout='" + name(s.layout) + "'";
  if (s.scale != 1.0) o += ", scale=" + literal(py::float_(s.scale));
  if (!s.sections.empty()) o += ", sections=" + literal(py::cast(s.sections));
  if (s.scaling.kind != ScalingKind::none)
    o += ", scaling='" + std::string(name(s.scaling.kind)) + "'";
  const Scaling defaults;
  for (const auto& [key, f] : scaling_fields()) {
    const py::object v = f.get(s.scaling);
    if (!v.equal(f.get(defaults))) o += ", " + key + "=" + literal(v);
  }
  return o + ")";
}

std::string policy_repr(const Policy& p) {
  return "Policy(angle='" + std::string(name(p.angle)) + "', table='" + name(p.table) +
         "', arithmetic='" + name(p.arithmetic) + "', recipe='" + name(p.recipe) +
         "', fused=" + (p.fused ? "True" : "False") +
         ", trig_error=" + literal(py::float_(p.trig_error)) +
         (p.table_rounding != Rounding::nearest_even
              ? std::string(", table_rounding='") + name(p.table_rounding) + "'"
              : std::string()) +
         (p.output_rounding != Rounding::nearest_even
              ? std::string(", output_rounding='") + name(p.output_rounding) + "'"
              : std::string()) +
         (p.trig_argument != TrigArgument::exact
              ? std::string(", trig_argument='") + name(p.trig_argument) + "'"
              : std::string()) +
         ")";
}

bool same_policy(const Policy& a, const Policy& b) {
  return a.angle == b.angle && a.table == b.table && a.arithmetic == b.arithmetic &&
         a.recipe == b.recipe && a.fused == b.fused && a.trig_error == b.trig_error &&
         a.table_rounding == b.table_rounding && a.output_rounding == b.output_rounding &&
         a.trig_argument == b.trig_argument;
}

// scaling: None, a kind name, or a dict {"kind" (or "rope_type"/"type"): ..., parameters...};
// params: further parameters given as keyword arguments of Spec().
Scaling scaling_arg(const py::object& scaling, const py::dict& params) {
  Scaling s;
  py::dict all;
  if (py::isinstance<py::dict>(scaling)) {
    for (auto kv : scaling.cast<py::dict>()) all[kv.first] = kv.second;
  } else if (!scaling.is_none()) {
    all["kind"] = scaling;
  }
  for (auto kv : params) all[kv.first] = kv.second;
  for (auto kv : all) {
    const auto key = kv.first.cast<std::string>();
    if (key == "kind" || key == "rope_type" || key == "type") {
      const auto k = kv.second.cast<std::string>();
      s.kind = parse_or_throw(parse_scaling_kind(k), "scaling", k);
      continue;
    }
    const ScalingField* f = find_field(key);
    if (!f) throw py::type_error("Spec: unknown argument or scaling parameter '" + key + "'");
    f->set(s, kv.second);
  }
  return s;
}

RopeSpec make_spec(std::int64_t head_dim, std::int64_t rotary_dim, double base,
                   const std::string& layout, double scale,
                   const std::vector<std::int64_t>& sections, const py::object& scaling,
                   const py::kwargs& params) {
  RopeSpec s;
  s.head_dim = head_dim;
  s.rotary_dim = rotary_dim;
  s.base = base;
  const auto l = parse_layout(layout);
  if (!l)  // "neox" and "gptj" are half and interleaved: the message lists the names
    throw py::value_error("layout: unknown value '" + layout + "' (one of " + layout_choices() +
                          "; NeoX / rotate_half is 'half', GPT-J / Meta complex is 'interleaved')");
  s.layout = *l;
  s.scale = scale;
  s.sections = sections;
  s.scaling = scaling_arg(scaling, params);
  try {
    return s.normalized();
  } catch (const SpecError& e) {
    throw py::value_error(e.what());
  }
}

// A path (str / os.PathLike) or a dict (the parsed config.json).
RopeSpec spec_from_hf(const py::object& config, std::int64_t seq_len,
                      const std::string& layer_type) {
  HfConfigOptions o;
  o.seq_len = seq_len;
  o.layer_type = layer_type;
  try {
    if (py::isinstance<py::dict>(config)) {
      const auto text = py::module_::import("json").attr("dumps")(config).cast<std::string>();
      return spec_from_hf_config(nlohmann::json::parse(text), o);
    }
    return read_hf_config(py::str(py::module_::import("os").attr("fspath")(config)), o);
  } catch (const SpecError& e) {
    throw py::value_error(e.what());
  }
}

Policy make_policy(const py::object& angle, const py::object& table, const py::object& arithmetic,
                   const std::string& recipe, bool fused, double trig_error,
                   const std::string& table_rounding, const std::string& output_rounding,
                   const std::string& trig_argument) {
  if (!(trig_error >= 0)) throw py::value_error("Policy: trig_error must be >= 0");
  Policy p{dtype_arg(angle, "angle"),
           dtype_arg(table, "table"),
           dtype_arg(arithmetic, "arithmetic"),
           AngleRecipe::hf_f32,
           false,
           "",
           2.0};
  p.recipe = parse_or_throw(parse_angle_recipe(recipe), "recipe", recipe);
  p.fused = fused;
  p.trig_error = trig_error;
  p.table_rounding =
      parse_or_throw(parse_rounding(table_rounding), "table_rounding", table_rounding);
  p.output_rounding =
      parse_or_throw(parse_rounding(output_rounding), "output_rounding", output_rounding);
  p.trig_argument =
      parse_or_throw(parse_trig_argument(trig_argument), "trig_argument", trig_argument);
  return p;
}

void bind_spec_scaling(py::class_<RopeSpec>& c) {
  c.def_property_readonly("scaling", [](const RopeSpec& s) { return name(s.scaling.kind); });
  for (const auto& [key, f] : scaling_fields()) {
    const auto get = f.get;
    c.def_property_readonly(key.c_str(), [get](const RopeSpec& s) { return get(s.scaling); });
  }
}

}  // namespace

Dtype dtype_arg(const std::string& s, const char* what) {
  const auto d = parse_dtype(s);
  if (!d)
    throw py::value_error(std::string(what) + " must be f64, f32, f16 or bf16 (got '" + s + "')");
  return *d;
}

Dtype dtype_arg(const py::object& o, const char* what) {
  if (py::isinstance<py::str>(o)) return dtype_arg(o.cast<std::string>(), what);
  // torch.bfloat16 / numpy.float32 (the type or a dtype): by their names.
  std::string n = py::str(py::hasattr(o, "__name__") ? o.attr("__name__") : o);
  if (n.rfind("torch.", 0) == 0) n = n.substr(6);
  static const std::pair<const char*, const char*> names[] = {
      {"float64", "f64"}, {"double", "f64"}, {"float32", "f32"},  {"float", "f32"},
      {"float16", "f16"}, {"half", "f16"},   {"bfloat16", "bf16"}};
  for (const auto& [long_name, short_name] : names)
    if (n == long_name) return dtype_arg(std::string(short_name), what);
  return dtype_arg(n, what);
}

void bind_spec(py::module_& m) {
  py::class_<RopeSpec> c(m, "Spec",
                         "A RoPE configuration (the C++ RopeSpec): head_dim, rotary_dim, base, "
                         "layout, scale, sections and the scaling variant with its parameters.");
  c.def(py::init(&make_spec), py::arg("head_dim"), py::arg("rotary_dim") = 0,
        py::arg("base") = 10000.0, py::arg("layout") = "half", py::arg("scale") = 1.0,
        py::arg("sections") = std::vector<std::int64_t>{}, py::arg("scaling") = py::none())
      .def_static("from_hf_config", &spec_from_hf, py::arg("config"), py::arg("seq_len") = 0,
                  py::arg("layer_type") = "",
                  "Spec of a Hugging Face config.json (a path or the parsed dict); layer_type "
                  "'full_attention' or 'sliding_attention' for a config with one RoPE per "
                  "layer type (Gemma 3)")
      .def_readonly("head_dim", &RopeSpec::head_dim)
      .def_readonly("rotary_dim", &RopeSpec::rotary_dim)
      .def_readonly("base", &RopeSpec::base)
      .def_readonly("scale", &RopeSpec::scale)
      .def_readonly("sections", &RopeSpec::sections)
      .def_property_readonly("layout", [](const RopeSpec& s) { return name(s.layout); })
      .def_property_readonly("n_axes", &RopeSpec::n_axes)
      .def_property_readonly("n_pairs", &RopeSpec::n_pairs)
      .def(
          "__eq__", [](const RopeSpec& a, const RopeSpec& b) { return a == b; }, py::is_operator())
      .def("__repr__", &spec_repr)
      .def("__hash__", [](const RopeSpec& s) { return py::hash(py::str(spec_repr(s))); });
  bind_spec_scaling(c);

  m.def(
      "_dtype_name",
      [](const py::object& o, const std::string& what) {
        return std::string(name(dtype_arg(o, what.c_str())));
      },
      py::arg("dtype"), py::arg("what") = "dtype");
  py::class_<Policy>(m, "Policy",
                     "A kernel's declared precision policy: what the error bounds derive from.")
      .def(py::init(&make_policy), py::arg("angle") = "f32", py::arg("table") = "f32",
           py::arg("arithmetic") = "f32", py::arg("recipe") = "hf_f32", py::arg("fused") = false,
           py::arg("trig_error") = 2.0, py::arg("table_rounding") = "nearest_even",
           py::arg("output_rounding") = "nearest_even", py::arg("trig_argument") = "exact")
      .def_property_readonly("angle", [](const Policy& p) { return name(p.angle); })
      .def_property_readonly("table", [](const Policy& p) { return name(p.table); })
      .def_property_readonly("arithmetic", [](const Policy& p) { return name(p.arithmetic); })
      .def_property_readonly("recipe", [](const Policy& p) { return name(p.recipe); })
      .def_readonly("fused", &Policy::fused)
      .def_readonly("trig_error", &Policy::trig_error)
      .def_property_readonly("table_rounding",
                             [](const Policy& p) { return name(p.table_rounding); })
      .def_property_readonly("output_rounding",
                             [](const Policy& p) { return name(p.output_rounding); })
      .def_property_readonly("trig_argument", [](const Policy& p) { return name(p.trig_argument); })
      .def(
          "__eq__", [](const Policy& a, const Policy& b) { return same_policy(a, b); },
          py::is_operator())
      .def("__repr__", &policy_repr)
      .def("__hash__", [](const Policy& p) { return py::hash(py::str(policy_repr(p))); });
}

}  // namespace ropecheck::python
