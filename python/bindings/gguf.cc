// Bindings for the GGUF reader: _core.gguf_read(path) hands back the header, every metadata value and every tensor
// (info + raw bytes) as plain Python objects, so tests can compare it with the gguf package field by field;
// _core.model_config_json(path) is the config.json a model path (directory or .gguf) loads with,
// _core.model_context_length(path) the context the engine derives from it, and _core.model_tensors(path) its tensors
// as the builders see them.
#include <nanobind/stl/optional.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstring>

#include "bindings.h"
#include "loader/gguf.h"
#include "loader/model_dir.h"
#include "models/hf_config.h"
#include "models/model.h"

namespace attnzoo::py {
namespace {

nb::bytes as_bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

// A numpy array of the packed scalars, in the element type the file declares.
template <typename T>
nb::object scalars(const GgufValue& v) {
  auto* copy = new T[v.size() ? size_t(v.size()) : 1];
  if (v.size()) std::memcpy(copy, v.packed().data(), size_t(v.size()) * sizeof(T));
  nb::capsule owner(copy, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(copy, {size_t(v.size())}, owner));
}

nb::object scalar_array(const GgufValue& v) {
  switch (v.elem_type()) {
    case GgufType::U8: return scalars<uint8_t>(v);
    case GgufType::I8: return scalars<int8_t>(v);
    case GgufType::U16: return scalars<uint16_t>(v);
    case GgufType::I16: return scalars<int16_t>(v);
    case GgufType::U32: return scalars<uint32_t>(v);
    case GgufType::I32: return scalars<int32_t>(v);
    case GgufType::F32: return scalars<float>(v);
    case GgufType::BOOL: return scalars<bool>(v);
    case GgufType::U64: return scalars<uint64_t>(v);
    case GgufType::I64: return scalars<int64_t>(v);
    default: return scalars<double>(v);
  }
}

// (type name, value): scalars as Python numbers, strings as bytes (GGUF does not promise UTF-8), arrays as
// (element type name, numpy array | list of bytes | list of nested (type, value) pairs).
nb::tuple value(const GgufValue& v) {
  const char* type = gguf_type_name(v.type());
  switch (v.type()) {
    case GgufType::STRING: return nb::make_tuple(type, as_bytes(v.as_string("value")));
    case GgufType::F32:
    case GgufType::F64: return nb::make_tuple(type, v.as_float("value"));
    case GgufType::BOOL: return nb::make_tuple(type, v.as_bool("value"));
    case GgufType::U64: return nb::make_tuple(type, v.raw_bits());
    case GgufType::ARRAY: {
      const char* elem = gguf_type_name(v.elem_type());
      if (v.elem_type() == GgufType::STRING) {
        nb::list items;
        for (const std::string& s : v.strings()) items.append(as_bytes(s));
        return nb::make_tuple(type, nb::make_tuple(elem, items));
      }
      if (v.elem_type() == GgufType::ARRAY) {
        nb::list items;
        for (const GgufValue& a : v.arrays()) items.append(value(a));
        return nb::make_tuple(type, nb::make_tuple(elem, items));
      }
      return nb::make_tuple(type, nb::make_tuple(elem, scalar_array(v)));
    }
    default: return nb::make_tuple(type, v.as_int("value"));
  }
}

nb::dict read(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  nb::dict d;
  d["version"] = f.version();
  d["alignment"] = f.alignment();
  d["data_offset"] = f.data_offset();
  nb::dict meta;
  for (const auto& [key, v] : f.metadata()) meta[key.c_str()] = value(v);
  d["metadata"] = meta;
  nb::list tensors;
  for (const GgufTensor& t : f.tensors()) {
    nb::dict td;
    td["name"] = t.name;
    nb::list ne;
    for (int64_t n : t.ne) ne.append(n);
    td["ne"] = ne;
    td["type"] = uint32_t(t.type);
    td["type_name"] = quant_type_name(t.type);
    td["offset"] = t.offset;
    td["data"] = nb::bytes(reinterpret_cast<const char*>(t.data), size_t(t.bytes));
    tensors.append(td);
  }
  d["tensors"] = tensors;
  return d;
}

// Every tensor of a model path as ModelFiles exposes it to the builders: Hugging Face name, name in the file,
// torch-order shape, storage format and the bytes the builders read (after the converter's edits are undone).
nb::list model_tensors(const std::string& path) {
  const ModelFiles files = ModelFiles::open(path);
  nb::list out;
  for (const std::string& name : files.names()) {
    const StoredTensor t = files.stored(name);
    nb::dict d;
    d["name"] = name;
    d["stored_name"] = files.stored_name(name);
    nb::list shape;
    for (int64_t n : t.shape) shape.append(n);
    d["shape"] = shape;
    d["type_name"] = quant_type_name(t.type);
    d["quantized"] = files.is_quantized(name);
    d["data"] = nb::bytes(reinterpret_cast<const char*>(t.data), size_t(t.bytes));
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_gguf(nb::module_& m) {
  m.def("gguf_read", &read, nb::arg("path"),
        "Header, metadata and tensors (info + raw bytes) of a GGUF file, validated as for loading.");
  m.def(
      "model_config_json",
      [](const std::string& path) { return ModelFiles::read_config_json(path); }, nb::arg("path"),
      "The config.json text a model path loads with (synthesized from the metadata for a GGUF).");
  m.def(
      "model_context_length",
      [](const std::string& path) {
        return context_length(Config::parse(ModelFiles::read_config_json(path), path).text_config());
      },
      nb::arg("path"),
      "The longest sequence the model serves (0: unbounded), read from its config without loading the weights: "
      "max_position_embeddings, or the context YaRN extends it to.");
  m.attr("context_origin") = kContextOrigin;  // for the messages that refuse past model_context_length
  m.def("find_model_gguf", &find_model_gguf, nb::arg("path"),
        "The GGUF file a model path names (the .gguf itself, or the one in a directory without safetensors), or None.");
  m.def("gguf_parse_count", &GgufFile::parse_count,
        "GGUF files this process has parsed (the loaders of one checkpoint share one parse).");
  m.def("model_tensors", &model_tensors, nb::arg("path"),
        "Every tensor of a model path as the architecture builders see it (name, stored name, shape, format, bytes).");
}

}  // namespace attnzoo::py
