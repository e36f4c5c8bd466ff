// Shared by tests/unit/test_pipeline_pictures.cpp: the injection switch and tally (the proof that
// the checks can fail), checks that take a corruption, and the tiny XML tokenizer and JSON reader
// the pictures are read back with (written for the test, no weft code).
#pragma once

#include <gtest/gtest.h>

#include "inject_tally.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pictest {

// Joins text pieces (std::string's operator+ on a literal trips GCC 12's -Wrestrict).
template <class... T>
inline std::string cat(const T&... parts) {
  std::string s;
  (s.append(parts), ...);
  return s;
}

// ---------------------------------------------------------------- injection (proof the checks can fail)

using inject::tally;
inline bool inject_enabled() { return inject::enabled(); }

// Runs check(got) (an empty string = fine, else what is wrong); with injection on, corrupt(got)
// first and the check must then fail.
template <class T>
inline void verify(const std::string& what, T got, const std::function<void(T&)>& corrupt,
                   const std::function<std::string(const T&)>& check) {
  const bool injected = inject_enabled();
  if (injected) corrupt(got);
  const std::string err = check(got);
  if (injected) {
    ++tally().injected;
    if (!err.empty())
      ++tally().caught;
    else
      ADD_FAILURE() << what << ": the corrupted result (WEFT_TEST_INJECT) passed the check";
  } else if (!err.empty()) {
    ADD_FAILURE() << what << ": " << err;
  }
}

inline void expect_numbers(const std::string& what, const std::vector<double>& got, const std::vector<double>& want,
                           double tol) {
  verify<std::vector<double>>(
      what, got,
      [](std::vector<double>& v) {
        if (!v.empty()) v[v.size() / 2] += 0.5;
      },
      [&](const std::vector<double>& v) -> std::string {
        if (v.size() != want.size())
          return cat("got ", std::to_string(v.size()), " values, want ", std::to_string(want.size()));
        for (size_t i = 0; i < v.size(); ++i) {
          if (!(std::fabs(v[i] - want[i]) <= tol)) {
            return cat("value ", std::to_string(i), " is ", std::to_string(v[i]), ", want ", std::to_string(want[i]));
          }
        }
        return "";
      });
}

inline void expect_strings(const std::string& what, const std::vector<std::string>& got,
                           const std::vector<std::string>& want) {
  verify<std::vector<std::string>>(
      what, got,
      [](std::vector<std::string>& v) {
        if (!v.empty()) v[v.size() / 2] += "?";
      },
      [&](const std::vector<std::string>& v) -> std::string {
        if (v.size() != want.size())
          return cat("got ", std::to_string(v.size()), " strings, want ", std::to_string(want.size()));
        for (size_t i = 0; i < v.size(); ++i) {
          if (v[i] != want[i]) return cat("string ", std::to_string(i), " is '", v[i], "', want '", want[i], "'");
        }
        return "";
      });
}

// ---------------------------------------------------------------- a tiny XML tokenizer

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // raw character data right after the start tag, up to the next '<'
};

// "" when `xml` is well-formed as far as the pictures need: one root, tags balanced and properly
// nested, attributes quoted and unique, '<' and '&' in text and attribute values only as the
// five predefined entities. Fills `elements` with the start tags in document order.
inline std::string parse_xml(const std::string& xml, std::vector<Element>* elements) {
  std::vector<std::string> open;
  int roots = 0;
  auto entities_ok = [](const std::string& s) {
    for (size_t i = s.find('&'); i != std::string::npos; i = s.find('&', i + 1)) {
      bool ok = false;
      for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
        ok = ok || s.compare(i, std::strlen(e), e) == 0;
      if (!ok) return false;
    }
    return s.find('<') == std::string::npos;
  };
  size_t i = 0;
  while (i < xml.size()) {
    const size_t lt = xml.find('<', i);
    const std::string text = xml.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (!entities_ok(text)) return cat("bad character data near offset ", std::to_string(i));
    if (open.empty() && text.find_first_not_of(" \r\n\t") != std::string::npos) return "text outside the root";
    if (elements && !elements->empty()) elements->back().text += text;
    if (lt == std::string::npos) break;
    if (xml.compare(lt, 5, "<?xml") == 0) {
      const size_t end = xml.find("?>", lt);
      if (lt != 0 || end == std::string::npos) return "misplaced XML declaration";
      i = end + 2;
      continue;
    }
    const size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) return cat("unterminated tag at offset ", std::to_string(lt));
    std::string tag = xml.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return cat("closing </", name, "> does not match the open element");
      open.pop_back();
      if (elements) elements->push_back({cat("/", name), {}, ""});
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    size_t p = tag.find_first_of(" \n\t");
    Element el;
    el.name = tag.substr(0, p);
    if (el.name.empty()) return cat("empty tag name at offset ", std::to_string(lt));
    while (p != std::string::npos && p < tag.size()) {
      p = tag.find_first_not_of(" \n\t", p);
      if (p == std::string::npos) break;
      const size_t eq = tag.find('=', p);
      if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"')
        return cat("unquoted attribute in <", el.name, ">");
      const size_t close = tag.find('"', eq + 2);
      if (close == std::string::npos) return cat("unterminated attribute in <", el.name, ">");
      const std::string key = tag.substr(p, eq - p), value = tag.substr(eq + 2, close - eq - 2);
      if (!entities_ok(value)) return cat("bad attribute value in <", el.name, ">");
      if (!el.attrs.emplace(key, value).second) return cat("attribute ", key, " twice in <", el.name, ">");
      p = close + 1;
    }
    if (open.empty() && ++roots > 1) return "more than one root element";
    if (!self_closing) open.push_back(el.name);
    if (elements) elements->push_back(std::move(el));
    if (self_closing && elements) elements->push_back({cat("/", elements->back().name), {}, ""});
  }
  if (!open.empty()) return cat("<", open.back(), "> is never closed");
  if (roots != 1) return "no root element";
  return "";
}

inline std::vector<Element> elements_of(const std::string& xml) {
  std::vector<Element> els;
  const std::string err = parse_xml(xml, &els);
  EXPECT_EQ(err, "");
  return els;
}

inline std::vector<const Element*> select(const std::vector<Element>& els, const std::string& name,
                                          const std::string& cls) {
  std::vector<const Element*> out;
  for (const Element& e : els) {
    auto c = e.attrs.find("class");
    if (e.name == name && (cls.empty() ? c == e.attrs.end() : (c != e.attrs.end() && c->second == cls)))
      out.push_back(&e);
  }
  return out;
}

inline std::vector<double> attr_numbers(const std::vector<const Element*>& els, const char* attr) {
  std::vector<double> out;
  for (const Element* e : els) {
    auto it = e->attrs.find(attr);
    out.push_back(it == e->attrs.end() ? NAN : std::atof(it->second.c_str()));
  }
  return out;
}

// ---------------------------------------------------------------- a tiny JSON reader

// A tiny JSON reader: enough of RFC 8259 to refuse what Chrome's parser would.
struct Json {
  enum Type { null, boolean, number, string, array, object } type = null;
  bool b = false;
  double n = 0;
  std::string s;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
  const Json* get(const std::string& key) const {
    for (const auto& m : members) {
      if (m.first == key) return &m.second;
    }
    return nullptr;
  }
};

struct JsonReader {
  const std::string& text;
  size_t i = 0;
  std::string error;

  void ws() {
    while (i < text.size() && std::strchr(" \t\r\n", text[i])) ++i;
  }
  bool fail(const std::string& why) {
    if (error.empty()) error = cat(why, " at offset ", std::to_string(i));
    return false;
  }
  bool literal(const char* word) {
    if (text.compare(i, std::strlen(word), word) != 0) return fail(std::string("expected ").append(word));
    i += std::strlen(word);
    return true;
  }
  bool str(std::string* out) {
    if (i >= text.size() || text[i] != '"') return fail("expected a string");
    for (++i; i < text.size() && text[i] != '"'; ++i) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      if (c < 0x20) return fail("control character in a string");
      if (c != '\\') {
        *out += static_cast<char>(c);
        continue;
      }
      if (++i >= text.size()) return fail("unterminated escape");
      const char e = text[i];
      static const char kEscapes[] = "\"\\/bfnrt";
      static const char kMeanings[] = {'"', '\\', '/', '\b', '\f', '\n', '\r', '\t'};
      const char* simple = std::strchr(kEscapes, e);
      if (simple && e != '\0') {
        *out += kMeanings[simple - kEscapes];
      } else if (e == 'u' && i + 4 < text.size()) {
        const unsigned long cp = std::strtoul(text.substr(i + 1, 4).c_str(), nullptr, 16);
        *out += static_cast<char>(cp < 0x80 ? cp : '?');
        i += 4;
      } else {
        return fail("bad escape");
      }
    }
    if (i >= text.size()) return fail("unterminated string");
    ++i;
    return true;
  }
  bool value(Json* v) {
    ws();
    if (i >= text.size()) return fail("unexpected end");
    const char c = text[i];
    if (c == '{') {
      v->type = Json::object;
      ++i;
      ws();
      if (i < text.size() && text[i] == '}') return ++i, true;
      for (;;) {
        ws();
        std::string key;
        if (!str(&key)) return false;
        ws();
        if (i >= text.size() || text[i] != ':') return fail("expected ':'");
        ++i;
        Json member;
        if (!value(&member)) return false;
        v->members.emplace_back(key, std::move(member));
        ws();
        if (i < text.size() && text[i] == ',') {
          ++i;
          continue;
        }
        if (i < text.size() && text[i] == '}') return ++i, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v->type = Json::array;
      ++i;
      ws();
      if (i < text.size() && text[i] == ']') return ++i, true;
      for (;;) {
        Json item;
        if (!value(&item)) return false;
        v->items.push_back(std::move(item));
        ws();
        if (i < text.size() && text[i] == ',') {
          ++i;
          continue;
        }
        if (i < text.size() && text[i] == ']') return ++i, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') return v->type = Json::string, str(&v->s);
    if (c == 't') return v->type = Json::boolean, v->b = true, literal("true");
    if (c == 'f') return v->type = Json::boolean, literal("false");
    if (c == 'n') return literal("null");
    // Numbers: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
    const size_t from = i;
    if (text[i] == '-') ++i;
    auto digits = [&] {
      size_t k = i;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
      return i > k;
    };
    if (i < text.size() && text[i] == '0')
      ++i;
    else if (!digits())
      return fail("bad value");
    if (i < text.size() && text[i] == '.') {
      ++i;
      if (!digits()) return fail("bad fraction");
    }
    if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
      ++i;
      if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
      if (!digits()) return fail("bad exponent");
    }
    v->type = Json::number;
    v->n = std::strtod(text.substr(from, i - from).c_str(), nullptr);
    return true;
  }
};

inline std::string parse_json(const std::string& text, Json* out) {
  JsonReader r{text, 0, ""};
  Json v;
  if (!r.value(&v)) return r.error;
  r.ws();
  if (r.i != text.size()) return cat("trailing text at offset ", std::to_string(r.i));
  if (out) *out = std::move(v);
  return "";
}

}  // namespace pictest
