#include "convert/gguf_requantize.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "convert/ftype_mixture.h"
#include "convert/tensor_policy.h"
#include "core/convert.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quantize.h"
#include "loader/gguf.h"
#include "loader/gguf_checkpoint.h"
#include "loader/gguf_writer.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

bool is_float(QuantType t) { return t == QuantType::F32 || t == QuantType::F16 || t == QuantType::BF16; }

// Rows [begin, begin + count) of a GGUF tensor (flattened to [rows, ne0]) and the importance they take.
struct ImportanceSlice {
  int64_t begin = 0, count = 0;
  const std::vector<float>* weights = nullptr;
};

// Where each Hugging Face importance vector lands: the loader's view of the file (gguf_hf_tensors) names each
// GGUF tensor's Hugging Face counterpart and, for a stacked tensor, the slice that expert is. Tensors whose
// columns are not the Hugging Face tensor's input channels (deepseek2's transposed attn_k_b, Qwen3.5's tiled
// value columns, Mamba's A) take none, as the Hugging Face path leaves them without.
std::map<std::string, std::vector<ImportanceSlice>> place_importance(const GgufFile& f, const QuantizeOptions& o) {
  std::map<std::string, std::vector<ImportanceSlice>> out;
  if (o.importance.empty()) return out;
  std::map<std::string, const std::vector<float>*> by_name;
  for (const auto& [name, w] : o.importance) by_name[name] = &w;
  auto place = [&](const std::string& tensor, const uint8_t* start, int64_t bytes, const std::vector<float>* w) {
    const GgufTensor& t = f.tensor(tensor);
    const int64_t row = t.row_bytes();
    if (row <= 0 || start < t.data || (start - t.data) % row != 0 || bytes % row != 0) return;
    if (int64_t(w->size()) != t.ne[0])
      throw ArgumentError("importance for tensor '" + tensor + "' of " + f.path() + ": " + std::to_string(w->size()) +
                          " values, its rows hold " + std::to_string(t.ne[0]));
    out[tensor].push_back({(start - t.data) / row, bytes / row, w});
  };
  for (const GgufHfTensor& h : gguf_hf_tensors(f)) {
    const auto it = by_name.find(h.hf_name);
    if (it == by_name.end()) continue;
    if (h.fix == GgufFix::none || h.fix == GgufFix::unpermute_rope_rows || h.fix == GgufFix::subtract_one)
      place(h.gguf_name, h.data, h.bytes, it->second);
  }
  for (auto& [name, slices] : out)
    std::sort(slices.begin(), slices.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  return out;
}

// gpt-oss's MXFP4 experts, kept as the Hugging Face path keeps an MXFP4 checkpoint's (its native format).
bool native_mxfp4_experts(const GgufTensor& t) {
  return t.type == QuantType::MXFP4 && t.name.find("_exps.") != std::string::npos;
}

// The type tensor `t` is written in; ArgumentError naming the file, tensor and the flag when a block-quantized
// one would be quantized again without allow_requantize, LoadError when its type cannot be read back to f32.
QuantType output_type(const GgufFile& f, const GgufTensor& t, const QuantizeOptions& o) {
  // 1-D: F32 by the policy (llama-quantize leaves them as stored, F32 in any converter's file), a block-quantized
  // or integer one as it is
  if (t.ne.size() < 2) return is_float(t.type) ? QuantType::F32 : t.type;
  if (kept_as_stored(t.name)) return t.type;
  if (native_mxfp4_experts(t)) return t.type;
  const std::vector<int64_t> shape(t.ne.rbegin(), t.ne.rend());
  const QuantType want = choose_tensor_type(o.policy, t.name, shape, t.type);
  if (want == t.type || is_float(t.type)) return want;
  if (!quant_is_blocked(t.type) || !quant_supported(t.type))
    throw LoadError(f.path() + ": tensor '" + t.name + "' is stored as " + quant_type_name(t.type) +
                    ", which quantize cannot read back to f32 (--keep '" + t.name + "' copies it as it is)");
  if (!o.allow_requantize)
    throw ArgumentError(f.path() + ": tensor '" + t.name + "' is already quantized (" + quant_type_name(t.type) +
                    "); quantizing it again to " + quant_type_name(want) +
                    " compounds the two roundings: pass --allow-requantize to do it anyway, or --keep to copy it");
  return want;
}

// Rows of this many f32 values at most are converted at once, so a large embedding is never held whole in f32.
constexpr int64_t kChunkValues = int64_t(1) << 24;

std::vector<uint8_t> convert_tensor(const GgufFile& f, const GgufTensor& t, QuantType type,
                                    const std::vector<ImportanceSlice>& slices) {
  const int64_t cols = t.ne[0], rows = t.numel() / cols, src_row = t.row_bytes();
  const int64_t out_row = *quant_row_bytes(type, cols);
  std::vector<uint8_t> out;
  out.reserve(size_t(rows * out_row));
  const std::string what = f.path() + ": tensor '" + t.name + "'";
  const int64_t chunk = std::max<int64_t>(1, kChunkValues / cols);
  std::vector<float> x;
  // Each run of rows shares one importance vector (or none); runs split further into chunks.
  auto emit = [&](int64_t begin, int64_t end, const std::vector<float>* w) {
    for (int64_t r = begin; r < end; r += chunk) {
      const int64_t n = std::min(chunk, end - r);
      x.resize(size_t(n * cols));
      const uint8_t* src = t.data + r * src_row;
      if (const auto dtype = dtype_of(t.type); dtype && is_float(t.type)) {
        convert_to_f32(src, *dtype, x.data(), size_t(n * cols));
      } else {
        for (int64_t i = 0; i < n; ++i) dequantize_row(t.type, src + i * src_row, x.data() + i * cols, cols);
      }
      const std::vector<uint8_t> q = quantize_matrix(type, x.data(), n, cols, w ? w->data() : nullptr, what);
      out.insert(out.end(), q.begin(), q.end());
    }
  };
  int64_t at = 0;
  for (const ImportanceSlice& s : slices) {
    if (s.begin < at || s.begin + s.count > rows) continue;  // overlapping or outside: the loader's view disagrees
    emit(at, s.begin, nullptr);
    emit(s.begin, s.begin + s.count, s.weights);
    at = s.begin + s.count;
  }
  emit(at, rows, nullptr);
  return out;
}

}  // namespace

bool kept_as_stored(const std::string& gguf_name) {
  if (!gguf_name.ends_with("weight")) return true;  // llama-quantize quantizes weights only (gpt-oss's [E, n] biases)
  std::string_view base = gguf_name;
  if (base.starts_with("blk.")) {
    const size_t dot = base.find('.', 4);
    base = dot == std::string_view::npos ? base : base.substr(dot + 1);
  }
  if (base.starts_with("ffn_gate_inp") || base.starts_with("ssm_conv1d") || base == "ssm_a" || base == "ssm_d" ||
      base.starts_with("ssm_norm") || base == "shortconv.conv.weight" || base == "time_mix_lerp_fused.weight" ||
      base == "time_mix_first.weight" || base.starts_with("time_mix_decay_w"))
    return true;
  // RWKV-7's LoRAs: time_mix_{w,a,v,g}{0,1,2}.weight
  return base.size() == 18 && base.starts_with("time_mix_") &&
         std::string_view("wavg").find(base[9]) != std::string_view::npos && base[10] >= '0' && base[10] <= '2' &&
         base.substr(11) == ".weight";
}

QuantizeSummary requantize_gguf(const std::string& src_path, const std::string& out_path, const QuantizeOptions& o) {
  const auto f = std::make_shared<const GgufFile>(GgufFile::open(src_path));
  if (f->has("split.count") && f->get_int("split.count") > 1)
    throw LoadError(src_path + ": key 'split.count': this is one part of a split GGUF file (" +
                    std::to_string(f->get_int("split.count")) +
                    " parts); join them first (llama-gguf-split --merge)");
  // The parser takes a 0 in ne (no bytes to bound), but every tensor is sized and converted by its rows of ne[0]
  // values below; an empty tensor is no weight llama-quantize writes either.
  for (const GgufTensor& t : f->tensors())
    if (std::any_of(t.ne.begin(), t.ne.end(), [](int64_t d) { return d <= 0; })) {
      std::string ne;
      for (int64_t d : t.ne) ne += (ne.empty() ? "" : ", ") + std::to_string(d);
      throw LoadError(src_path + ": tensor '" + t.name + "': ne [" + ne + "] has an empty dimension");
    }
  const auto importance = place_importance(*f, o);

  QuantizeSummary summary;
  if (const GgufValue* a = f->find("general.architecture"); a && a->type() == GgufType::STRING)
    summary.architecture = a->as_string("general.architecture");
  summary.tokenizer = f->has("tokenizer.ggml.model");
  // llama.cpp's 32-byte alignment whatever the source's: llama-quantize pads its output to 32 while copying a
  // general.alignment key, so a source at 64 (attnzoo wrote those before) would hand it a file no reader accepts;
  // requantizing such a file here is the way to mend it. The source's key is dropped: 32 is what readers assume.
  GgufWriter w;
  // The file type's rules are settled over the whole file first (they count tensors), from the source's keys.
  QuantizeOptions resolved = o;
  {
    std::vector<MixtureTensor> names;
    for (const GgufTensor& t : f->tensors())
      names.push_back({t.name, std::vector<int64_t>(t.ne.rbegin(), t.ne.rend()),
                       !kept_as_stored(t.name) && !native_mxfp4_experts(t)});
    auto get = [&f](const std::string& key) -> std::optional<int64_t> {
      const GgufValue* v = f->find(key);
      if (!v || (v->is_array() && v->size() == 0)) return std::nullopt;
      const GgufValue first = v->is_array() ? v->at(0) : *v;
      if (first.type() == GgufType::STRING || first.is_array() || first.type() == GgufType::F32 ||
          first.type() == GgufType::F64 || first.type() == GgufType::BOOL)
        return std::nullopt;
      return first.as_int(key);
    };
    resolved.policy.mixture_types = resolve_mixture(o.policy, mixture_model(summary.architecture, get,
                                                                            !o.importance.empty()), names);
  }
  std::vector<QuantType> types;
  bool any_quantized = false;
  for (const GgufTensor& t : f->tensors()) {
    types.push_back(output_type(*f, t, resolved));
    any_quantized = any_quantized || quant_is_blocked(types.back());
  }

  bool file_type = false, version = false;
  for (const auto& [key, value] : f->metadata()) {
    if (key.starts_with("split.") || key == "general.alignment") continue;
    if (key == "general.file_type") {
      w.add_u32(key, llama_file_type(o.policy));
      file_type = true;
    } else if (key == "general.quantization_version") {
      if (any_quantized) w.add_u32(key, 2);
      version = true;
    } else {
      w.add_value(key, value);
    }
  }
  if (!file_type) w.add_u32("general.file_type", llama_file_type(o.policy));

  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const GgufTensor& t = f->tensors()[i];
    const QuantType type = types[i];
    QuantizedTensor q;
    q.gguf_name = t.name;
    q.shape.assign(t.ne.rbegin(), t.ne.rend());
    q.source = t.type;
    q.type = type;
    const auto row = quant_row_bytes(type, t.ne[0]);
    if (!row)  // choose_tensor_type fits every row; a forced type may not
      throw LoadError(src_path + ": tensor '" + t.name + "': rows of " + std::to_string(t.ne[0]) +
                      " values are not whole " + quant_type_name(type) + " blocks");
    q.bytes = uint64_t(t.numel() / t.ne[0]) * uint64_t(*row);
    summary.bytes_in += uint64_t(t.bytes);
    summary.bytes_out += q.bytes;
    summary.requantized += type != t.type && quant_is_blocked(t.type);
    const auto it = importance.find(t.name);
    const std::vector<ImportanceSlice> slices = it == importance.end() ? std::vector<ImportanceSlice>{} : it->second;
    w.add_tensor(t.name, t.ne, type, [f, &t, type, slices] {
      if (type == t.type) return std::vector<uint8_t>(t.data, t.data + t.bytes);
      return convert_tensor(*f, t, type, slices);
    });
    summary.tensors.push_back(std::move(q));
  }
  if (any_quantized && !version) w.add_u32("general.quantization_version", 2);
  w.write(out_path);
  return summary;
}

}  // namespace attnzoo
