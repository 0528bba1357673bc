#include "engine/json_schema_union.h"

#include <algorithm>
#include <set>
#include <string>

#include "core/error.h"

namespace attnzoo {
namespace {

using Kind = JsonSchema::Kind;
constexpr uint16_t kNone = JsonSchema::kNone;

[[noreturn]] void refuse(size_t branch, const std::string& what) {
  throw ArgumentError("tagged union: branch " + std::to_string(branch) + ": " + what);
}

// The one text a single-valued literal trie holds (its quoted string), walking its only path.
std::string only_text(const JsonSchema& g, uint32_t at, size_t branch) {
  std::string out;
  while (g.trie[at].terminal < 0) {
    if (g.trie[at].edges.size() != 1) refuse(branch, "the tag must be one constant string");
    out += char(g.trie[at].edges[0].first);
    at = g.trie[at].edges[0].second;
  }
  if (!g.trie[at].edges.empty() || out.empty() || out[0] != '"') refuse(branch, "the tag must be one constant string");
  return out;
}

// The first property's quoted key in an object's key trie: the path whose nodes carry bit 0.
std::string first_key(const JsonSchema& g, uint32_t at) {
  std::string out;
  while (g.trie[at].terminal != 0) {
    uint32_t next = JsonSchema::kUnbounded;
    for (const auto& [byte, child] : g.trie[at].edges)
      if (g.trie[child].mask & 1) {
        out += char(byte);
        next = child;
        break;
      }
    if (next == JsonSchema::kUnbounded) return {};
    at = next;
  }
  return out;
}

// The object node a branch's document is.
uint16_t root_object(const JsonSchema& g, size_t branch) {
  const auto& root = g.positions[g.root];
  if (root.branches.size() != 1 || g.nodes[root.branches[0]].kind != Kind::object)
    refuse(branch, "the document must be an object with properties");
  return root.branches[0];
}

}  // namespace

std::shared_ptr<const JsonSchema> tagged_union(const std::vector<std::shared_ptr<const JsonSchema>>& branches) {
  if (branches.empty()) throw ArgumentError("tagged union: no branches");
  auto u = std::make_shared<JsonSchema>();
  std::vector<uint16_t> objects;  // each branch's object, renumbered
  std::vector<std::string> tags;
  uint32_t key_trie = 0;
  const std::string tag_key = first_key(*branches[0], branches[0]->nodes[root_object(*branches[0], 0)].trie);
  for (size_t b = 0; b < branches.size(); ++b) {
    const JsonSchema& g = *branches[b];
    const uint16_t object = root_object(g, b);
    const auto& o = g.nodes[object];
    if (o.num_properties < 1 || !(o.required & 1)) refuse(b, "the first property (the tag) must be required");
    const auto& tag_position = g.positions[g.properties[o.first_property].value];
    if (tag_position.branches.size() != 1 || g.nodes[tag_position.branches[0]].kind != Kind::literal)
      refuse(b, "the tag must be one constant string");
    tags.push_back(only_text(g, g.nodes[tag_position.branches[0]].trie, b));
    // Appended whole, every index shifted by what came before it.
    const size_t nodes = u->nodes.size(), positions = u->positions.size(), properties = u->properties.size(),
                 trie = u->trie.size(), bounds = u->number_bounds.size(), patterns = u->patterns.size(),
                 lengths = u->string_lengths.size(), keys = u->key_patterns.size();
    if (nodes + g.nodes.size() + 2 >= kNone || positions + g.positions.size() + 2 >= kNone)
      throw ArgumentError("tagged union: too many schemas");
    for (JsonSchema::Node n : g.nodes) {
      if (n.child != kNone) n.child = uint16_t(n.child + positions);
      n.first_property += uint32_t(properties);
      n.trie += uint32_t(trie);
      if (n.bounds != kNone) n.bounds = uint16_t(n.bounds + bounds);
      if (n.pattern != kNone) n.pattern = uint16_t(n.pattern + patterns);
      if (n.lengths != kNone) n.lengths = uint16_t(n.lengths + lengths);
      if (n.keys != kNone) n.keys = uint16_t(n.keys + keys);
      u->nodes.push_back(n);
    }
    if (bounds + g.number_bounds.size() >= kNone) throw ArgumentError("tagged union: too many bounded numbers");
    u->number_bounds.insert(u->number_bounds.end(), g.number_bounds.begin(), g.number_bounds.end());
    if (patterns + g.patterns.size() >= kNone) throw ArgumentError("tagged union: too many patterns");
    u->patterns.insert(u->patterns.end(), g.patterns.begin(), g.patterns.end());
    if (lengths + g.string_lengths.size() >= kNone) throw ArgumentError("tagged union: too many bounded patterns");
    u->string_lengths.insert(u->string_lengths.end(), g.string_lengths.begin(), g.string_lengths.end());
    if (keys + g.key_patterns.size() >= kNone) throw ArgumentError("tagged union: too many patterned keys");
    for (JsonSchema::KeyPattern k : g.key_patterns) {
      k.pattern = uint16_t(k.pattern + patterns);
      for (uint16_t& v : k.value)
        if (v != kNone) v = uint16_t(v + positions);
      for (uint16_t& v : k.positions) v = uint16_t(v + positions);
      u->key_patterns.push_back(std::move(k));
    }
    for (JsonSchema::Position p : g.positions) {
      for (uint16_t& id : p.by_byte)
        if (id != kNone) id = uint16_t(id + nodes);
      for (uint16_t& id : p.branches) id = uint16_t(id + nodes);
      u->positions.push_back(std::move(p));
    }
    for (JsonSchema::Property p : g.properties) u->properties.push_back({uint16_t(p.value + positions)});
    for (JsonSchema::TrieNode t : g.trie) {
      for (auto& e : t.edges) e.second += uint32_t(trie);
      u->trie.push_back(std::move(t));
    }
    u->node_need.insert(u->node_need.end(), g.node_need.begin(), g.node_need.end());
    u->position_need.insert(u->position_need.end(), g.position_need.begin(), g.position_need.end());
    objects.push_back(uint16_t(object + nodes));
    if (b == 0) key_trie = o.trie + uint32_t(trie);
    if (first_key(g, o.trie) != tag_key) refuse(b, "the tag must be the first key of every branch");
  }
  if (std::set<std::string>(tags.begin(), tags.end()).size() != tags.size())
    throw ArgumentError("tagged union: two branches have the same tag");

  // The tag's values, each ending on its branch's index.
  const uint32_t tag_trie = u->add_trie(tags, /*keys=*/false);
  JsonSchema::Node tag;
  tag.kind = Kind::literal;
  tag.trie = tag_trie;
  const uint16_t tag_node = uint16_t(u->nodes.size());
  u->nodes.push_back(tag);
  u->node_need.push_back(0);
  JsonSchema::Position tag_position;
  tag_position.by_byte.fill(kNone);
  tag_position.by_byte['"'] = tag_node;
  tag_position.branches = {tag_node};
  const uint16_t tag_at = uint16_t(u->positions.size());
  u->positions.push_back(tag_position);
  u->position_need.push_back(0);

  // The union's object: the tag is its only property; its key trie is the first branch's (the same key leads).
  JsonSchema::Node object;
  object.kind = Kind::object;
  object.first_property = uint32_t(u->properties.size());
  object.num_properties = 1;
  object.required = 1;
  object.trie = key_trie;
  object.first_variant = uint32_t(u->variants.size());
  object.num_variants = uint32_t(objects.size());
  u->variants.insert(u->variants.end(), objects.begin(), objects.end());
  u->properties.push_back({tag_at});
  const uint16_t object_node = uint16_t(u->nodes.size());
  u->nodes.push_back(object);
  uint16_t need = 0;
  for (uint16_t o : objects) need = std::max(need, u->node_need[o]);  // the deepest branch: no dead end at any tag
  u->node_need.push_back(need);
  JsonSchema::Position root;
  root.by_byte.fill(kNone);
  root.by_byte['{'] = object_node;
  root.branches = {object_node};
  u->root = uint16_t(u->positions.size());
  u->positions.push_back(root);
  u->position_need.push_back(need);
  return u;
}

}  // namespace attnzoo
