// attnzoo quantize from Python: a Hugging Face checkpoint written as a (quantized) GGUF file.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert/calibration.h"
#include "convert/ftype_mixture.h"
#include "convert/gguf_export.h"

namespace attnzoo::py {

void bind_convert(nb::module_& m) {
  m.def("quantize_checkpoint",
        [](const std::string& src, const std::string& out, const std::string& type,
           const std::optional<std::string>& output_tensor_type, const std::optional<std::string>& token_embedding_type,
           const std::vector<std::pair<std::string, std::string>>& tensor_types, const std::vector<std::string>& keep,
           const std::optional<std::string>& calibration, int64_t calibration_chunk, int64_t calibration_tokens,
           bool allow_requantize, bool pure) {
          QuantizeOptions o;
          set_file_type(o.policy, type, "type");
          o.policy.pure = pure;
          if (output_tensor_type) o.policy.output_type = parse_quant_type(*output_tensor_type, "output_tensor_type");
          if (token_embedding_type)
            o.policy.token_embedding_type = parse_quant_type(*token_embedding_type, "token_embedding_type");
          for (const auto& [pattern, t] : tensor_types)
            o.policy.tensor_types.emplace_back(pattern, parse_quant_type(t, "tensor_types"));
          o.policy.keep = keep;
          o.allow_requantize = allow_requantize;
          nb::dict d;
          QuantizeSummary s;
          {
            nb::gil_scoped_release release;
            refuse_output_over_source(src, out);  // before calibration's forward passes
            if (calibration) o.importance = collect_importance(src, *calibration, calibration_chunk, calibration_tokens).importance;
            s = quantize_checkpoint(src, out, o);
          }
          nb::list tensors;
          for (const QuantizedTensor& t : s.tensors) {
            nb::dict td;
            td["name"] = t.gguf_name;
            td["hf_name"] = t.hf_name;
            td["shape"] = t.shape;
            td["type"] = quant_type_name(t.type);
            td["source_type"] = quant_type_name(t.source);
            td["bytes"] = t.bytes;
            tensors.append(td);
          }
          d["architecture"] = s.architecture;
          d["tensors"] = tensors;
          d["tokenizer"] = s.tokenizer;
          d["bytes_in"] = s.bytes_in;
          d["bytes_out"] = s.bytes_out;
          d["set_aside"] = s.set_aside;
          d["calibrated"] = calibration.has_value();
          d["requantized"] = s.requantized;
          return d;
        },
        nb::arg("src"), nb::arg("out"), nb::arg("type"), nb::arg("output_tensor_type").none(),
        nb::arg("token_embedding_type").none(), nb::arg("tensor_types"), nb::arg("keep"),
        nb::arg("calibration").none(), nb::arg("calibration_chunk"), nb::arg("calibration_tokens"),
        nb::arg("allow_requantize") = false, nb::arg("pure") = false);
}

}  // namespace attnzoo::py
