// Byte-level BPE's Hugging Face tokenizer.json: writing it, and reading it with every setting
// depthgrad would not reproduce refused by name.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>

#include "train/io/files.h"
#include "train/io/json.h"
#include "train/lm/text/bpe.h"
#include "train/lm/text/pretokenize.h"

namespace dg {

namespace {
json::Value byte_level_config(bool add_prefix_space) {
  json::Value config;
  config["type"] = "ByteLevel";
  config["add_prefix_space"] = add_prefix_space;
  config["trim_offsets"] = true;
  config["use_regex"] = true;
  return config;
}
}  // namespace

std::string BpeTokenizer::to_json() const {
  json::Value root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  json::Value added = json::Array{};
  std::vector<AddedToken> sorted = added_;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (const AddedToken& token : sorted) {
    json::Value entry;
    entry["id"] = token.id;
    entry["content"] = token.content;
    entry["single_word"] = false;
    entry["lstrip"] = false;
    entry["rstrip"] = false;
    entry["normalized"] = token.normalized;
    entry["special"] = token.special;
    added.push_back(std::move(entry));
  }
  root["added_tokens"] = std::move(added);
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = byte_level_config(false);
  root["post_processor"] = nullptr;
  root["decoder"] = byte_level_config(true);  // what Python's decoders.ByteLevel() writes
  json::Value& model = root["model"];
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = unk_token_.empty() ? json::Value() : json::Value(unk_token_);
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  json::Value& vocab = model["vocab"];
  vocab = json::Object{};
  for (int32_t id = 0; id < model_size_; ++id) vocab[tokens_[id]] = id;
  json::Value merges = json::Array{};
  for (const MergeRule& m : merges_)
    merges.push_back(json::Array{tokens_[m.left], tokens_[m.right]});
  model["merges"] = std::move(merges);
  return json::dump(root, 2);
}

namespace {

// Reads tokenizer.json's fields, every error naming the file and the field.
class TokenizerJsonReader {
 public:
  explicit TokenizerJsonReader(const std::string& source_name) : source_(source_name) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw std::runtime_error(fmt::format("{}: {}: {}", source_, field, what));
  }
  // Runs `read`, turning the json accessors' kind errors into errors that name the field.
  template <typename Read>
  decltype(auto) field(const std::string& name, const Read& read) const {
    try {
      return read();
    } catch (const std::runtime_error& e) {
      fail(name, e.what());
    }
  }
  void require_null(const json::Value& object, const std::string& prefix, std::string_view key,
                    const std::string& why) const {
    const json::Value* value = object.find(key);
    if (value && !value->is_null()) fail(prefix + std::string(key), "must be null (" + why + ")");
  }
  void require_bool(const json::Value& object, const std::string& prefix, std::string_view key,
                    bool wanted, bool default_value) const {
    const json::Value* value = object.find(key);
    const std::string name = prefix + std::string(key);
    const bool actual = value ? field(name, [&] { return value->as_bool(); }) : default_value;
    if (actual != wanted)
      fail(name, fmt::format("must be {} (other settings are not supported)", wanted));
  }
  void require_byte_level(const json::Value& root, std::string_view key, bool nullable,
                          bool check_prefix) const {
    const json::Value* value = root.find(key);
    const std::string name(key);
    if (!value || value->is_null()) {
      if (!nullable) fail(name, "missing (a ByteLevel pre-tokenizer is required)");
      return;
    }
    if (!value->is_object()) fail(name, "expected an object");
    const json::Value* type = value->find("type");
    if (!type || !type->is_string() || type->as_string() != "ByteLevel") {
      fail(name + ".type", "only \"ByteLevel\" is supported");
    }
    if (check_prefix) {
      require_bool(*value, name + ".", "add_prefix_space", false, true);
      require_bool(*value, name + ".", "use_regex", true, true);
    }
  }

 private:
  const std::string& source_;
};

// Refuses every setting depthgrad's byte-level BPE would not reproduce; returns the model object.
const json::Value& supported_model(const TokenizerJsonReader& in, const json::Value& root) {
  if (!root.is_object()) in.fail("(top level)", "expected an object");
  const json::Value* version = root.find("version");
  if (!version || !version->is_string() || version->as_string() != "1.0")
    in.fail("version", "must be \"1.0\"");
  in.require_null(root, "", "truncation", "truncation is not supported");
  in.require_null(root, "", "padding", "padding is not supported");
  in.require_null(root, "", "normalizer", "normalizers are not supported");
  in.require_byte_level(root, "pre_tokenizer", false, true);
  in.require_byte_level(root, "post_processor", true, false);  // ByteLevel only changes offsets
  in.require_byte_level(root, "decoder", true, false);

  const json::Value* model = root.find("model");
  if (!model || !model->is_object()) in.fail("model", "missing or not an object");
  const json::Value* type = model->find("type");
  if (type && (!type->is_string() || type->as_string() != "BPE"))
    in.fail("model.type", "only \"BPE\" is supported");
  in.require_null(*model, "model.", "dropout", "BPE dropout is not supported");
  // GPT-2's file writes "" for these two, which means none: accepted as null.
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json::Value* value = model->find(key);
    if (!(value && value->is_string() && value->as_string().empty()))
      in.require_null(*model, "model.", key, "not supported");
  }
  in.require_bool(*model, "model.", "fuse_unk", false, false);
  in.require_bool(*model, "model.", "byte_fallback", false, false);
  in.require_bool(*model, "model.", "ignore_merges", false, false);
  return *model;
}

// model.vocab: the tokens by id (ids must be 0..size-1, each once).
std::vector<std::string> read_vocab(const TokenizerJsonReader& in, const json::Value& model) {
  const json::Value* vocab = model.find("vocab");
  if (!vocab) in.fail("model.vocab", "missing");
  const json::Object& entries =
      in.field("model.vocab", [&]() -> const json::Object& { return vocab->as_object(); });
  std::vector<std::string> tokens(entries.size(), std::string());
  std::vector<bool> seen(entries.size(), false);
  for (const auto& entry : entries) {
    // Plain variables, not a structured binding: clang < 16 cannot capture a binding in a lambda.
    const std::string& token = entry.first;
    const json::Value& id_value = entry.second;
    const std::string name = fmt::format("model.vocab[\"{}\"]", token);
    const int64_t id = in.field(name, [&] { return id_value.as_int(); });
    if (id < 0 || id >= static_cast<int64_t>(entries.size())) {
      in.fail(name,
              fmt::format("id {} is outside [0, {}) (ids must be 0..size-1)", id, entries.size()));
    }
    if (seen[id]) in.fail(name, fmt::format("id {} is used twice", id));
    seen[id] = true;
    tokens[id] = token;
  }
  return tokens;
}

// model.merges by rank, as (left, right, merged) ids of `tokens`; each entry is ["left", "right"]
// or the legacy "left right".
std::vector<std::array<int32_t, 3>> read_merges(const TokenizerJsonReader& in,
                                                const json::Value& model,
                                                const std::vector<std::string>& tokens) {
  std::unordered_map<std::string, int32_t> ids;
  for (int32_t id = 0; id < static_cast<int32_t>(tokens.size()); ++id) ids.emplace(tokens[id], id);
  const json::Value* merges = model.find("merges");
  if (!merges) in.fail("model.merges", "missing");
  const json::Array& merge_list =
      in.field("model.merges", [&]() -> const json::Array& { return merges->as_array(); });
  std::vector<std::array<int32_t, 3>> out;
  for (size_t rank = 0; rank < merge_list.size(); ++rank) {
    const std::string name = fmt::format("model.merges[{}]", rank);
    const json::Value& item = merge_list[rank];
    std::string left, right;
    if (item.is_string()) {  // legacy "left right"
      const std::string& line = item.as_string();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        in.fail(name, fmt::format("'{}' is not two tokens separated by one space", line));
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (item.is_array() && item.size() == 2 && item.at(size_t{0}).is_string() &&
               item.at(size_t{1}).is_string()) {
      left = item.at(size_t{0}).as_string();
      right = item.at(size_t{1}).as_string();
    } else {
      in.fail(name, "expected [\"left\", \"right\"] or \"left right\"");
    }
    const auto find = [&](const std::string& token) {
      const auto it = ids.find(token);
      if (it == ids.end()) in.fail(name, fmt::format("token '{}' is not in model.vocab", token));
      return it->second;
    };
    out.push_back({find(left), find(right), find(left + right)});
  }
  return out;
}

// added_tokens: each either a model token with the same id, or the next id after the last
// (appended to `tokens`); none twice.
std::vector<BpeTokenizer::AddedToken> read_added_tokens(const TokenizerJsonReader& in,
                                                        const json::Value& root,
                                                        std::vector<std::string>& tokens) {
  std::vector<BpeTokenizer::AddedToken> added_tokens;
  const json::Value* added = root.find("added_tokens");
  if (!added || added->is_null()) return added_tokens;
  const json::Array& list =
      in.field("added_tokens", [&]() -> const json::Array& { return added->as_array(); });
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = fmt::format("added_tokens[{}]", i);
    const json::Value& item = list[i];
    if (!item.is_object()) in.fail(name, "expected an object");
    BpeTokenizer::AddedToken token;
    const int64_t id = in.field(name + ".id", [&] { return item.at("id").as_int(); });
    if (id < 0 || id > std::numeric_limits<int32_t>::max())  // once indexed tokens_[-1]
      in.fail(name + ".id", fmt::format("{} is not a valid id", id));
    token.id = static_cast<int32_t>(id);
    token.content = in.field(name + ".content", [&] { return item.at("content").as_string(); });
    const json::Value* special = item.find("special");
    token.special =
        special ? in.field(name + ".special", [&] { return special->as_bool(); }) : false;
    const json::Value* normalized = item.find("normalized");
    token.normalized = normalized
                           ? in.field(name + ".normalized", [&] { return normalized->as_bool(); })
                           : !token.special;
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      in.require_bool(item, name + ".", flag, false, false);
    if (token.content.empty()) in.fail(name + ".content", "is empty");
    const int32_t size = static_cast<int32_t>(tokens.size());
    if (token.id < size) {
      if (tokens[token.id] != token.content) {
        in.fail(name, fmt::format("id {} is '{}' in model.vocab, not '{}'", token.id,
                                  tokens[token.id], token.content));
      }
    } else if (token.id == size) {
      tokens.push_back(token.content);
    } else {
      in.fail(name + ".id",
              fmt::format("{} leaves a gap after the last id {}", token.id, size - 1));
    }
    for (const BpeTokenizer::AddedToken& other : added_tokens) {
      if (other.content == token.content)
        in.fail(name, fmt::format("'{}' is added twice", token.content));
    }
    added_tokens.push_back(std::move(token));
  }
  return added_tokens;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(std::string_view text, const std::string& source_name) {
  const json::Value root = json::parse(text, source_name);
  const TokenizerJsonReader in(source_name);
  const json::Value& model = supported_model(in, root);
  BpeTokenizer tokenizer;
  const json::Value* unk = model.find("unk_token");
  if (unk && !unk->is_null())
    tokenizer.unk_token_ = in.field("model.unk_token", [&] { return unk->as_string(); });
  if (unk && unk->is_null()) tokenizer.unk_token_.clear();
  tokenizer.tokens_ = read_vocab(in, model);
  tokenizer.model_size_ = static_cast<int32_t>(tokenizer.tokens_.size());
  for (const auto& [left, right, result] : read_merges(in, model, tokenizer.tokens_))
    tokenizer.merges_.push_back({left, right, result});
  tokenizer.added_ = read_added_tokens(in, root, tokenizer.tokens_);
  tokenizer.finish(source_name);
  return tokenizer;
}

void BpeTokenizer::save(const std::string& path) const { write_file_atomic(path, to_json()); }

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  return from_json(read_file(path), path);
}

}  // namespace dg
