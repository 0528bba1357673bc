// Bindings for the explainer (attnzoo.explain): the tile grid the prefill kernel walks, taken from the
// kernel's own planning functions so the figure shows what was computed, masked or skipped.
#include <nanobind/stl/optional.h>

#include <optional>
#include <vector>

#include "bindings.h"
#include "core/error.h"
#include "explain/tile_grid.h"

namespace attnzoo::py {

void bind_explain(nb::module_& m) {
  m.def("prefill_tile_grid",
        [](int64_t Tq, int64_t Tk, bool causal, std::optional<int64_t> window, const BlockMask* block_mask) {
          AttentionOptions o;
          o.causal = causal;
          if (window) {
            require(*window >= 1, "window", "must be >= 1 (use None for no window), got " + std::to_string(*window));
            o.window = *window;
          }
          o.block_mask = block_mask;
          const explain::TileGrid g = explain::prefill_tile_grid(Tq, Tk, o);
          auto* cells = new std::vector<uint8_t>(g.visits.size());
          for (size_t i = 0; i < g.visits.size(); ++i) (*cells)[i] = uint8_t(g.visits[i]);
          nb::capsule owner(cells, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
          nb::dict d;
          d["Tq"] = g.Tq;
          d["Tk"] = g.Tk;
          d["block_q"] = g.block_q;
          d["block_k"] = g.block_k;
          d["grid"] = nb::ndarray<nb::numpy, uint8_t, nb::ndim<2>>(
              cells->data(), {size_t(g.num_q_blocks), size_t(g.num_k_tiles)}, owner);
          nb::list order;
          for (int64_t qb : g.task_order) order.append(qb);
          d["task_order"] = order;
          return d;
        },
        nb::arg("Tq"), nb::arg("Tk"), nb::arg("causal") = true, nb::arg("window").none() = nb::none(),
        nb::arg("block_mask").none() = nb::none(),
        "Tile grid of one prefill head: uint8 [query blocks, key tiles], 0 = outside the visible key range "
        "(never visited), 1 = visited but skipped (no visible pair), 2 = full, 3 = partial (masked).");
}

}  // namespace attnzoo::py
