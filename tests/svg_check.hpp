// svg_check.hpp - what the tests of pictures share: an XML well-formedness check (the SVGs must
// open in a browser, which refuses malformed XML) and reading an element's attributes back.
#pragma once
#include <cctype>
#include <cstddef>
#include <string>
#include <vector>

namespace svg_check {

namespace detail {

inline bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
inline bool name_char(char c) {
  return name_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
}

// An entity reference at s[i] == '&': &lt; &gt; &amp; &quot; &apos; &#123; &#x1F;. Returns its length, 0 if invalid.
inline std::size_t entity_length(const std::string& s, std::size_t i) {
  const std::size_t semi = s.find(';', i);
  if (semi == std::string::npos || semi - i > 10) return 0;
  const std::string body = s.substr(i + 1, semi - i - 1);
  if (body == "lt" || body == "gt" || body == "amp" || body == "quot" || body == "apos") return semi - i + 1;
  if (body.size() >= 2 && body[0] == '#') {
    const bool hex = body[1] == 'x';
    const std::string digits = body.substr(hex ? 2 : 1);
    if (digits.empty()) return 0;
    for (char c : digits)
      if (!(hex ? std::isxdigit(static_cast<unsigned char>(c)) : std::isdigit(static_cast<unsigned char>(c)))) return 0;
    return semi - i + 1;
  }
  return 0;
}

// Character data from i up to the next '<': no raw '&' outside an entity.
inline std::string check_text(const std::string& s, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i)
    if (s[i] == '&') {
      const std::size_t n = entity_length(s, i);
      if (n == 0) return "a bare '&' at offset " + std::to_string(i);
      i += n - 1;
    }
  return "";
}

} // namespace detail

// "" if `xml` is a well-formed XML document (one root element, every tag closed in order,
// attributes quoted and unique per element, entities valid), else what is wrong and where.
// Comments, processing instructions and a DOCTYPE (without an internal subset) are skipped.
inline std::string well_formed(const std::string& xml) {
  using namespace detail;
  std::vector<std::string> open;
  int roots = 0;
  std::size_t i = 0;
  while (i < xml.size()) {
    const std::size_t lt = xml.find('<', i);
    const std::size_t text_end = lt == std::string::npos ? xml.size() : lt;
    if (open.empty()) {
      for (std::size_t k = i; k < text_end; ++k)
        if (!std::isspace(static_cast<unsigned char>(xml[k]))) return "text outside the root at offset " + std::to_string(k);
    } else if (std::string e = check_text(xml, i, text_end); !e.empty()) {
      return e;
    }
    if (lt == std::string::npos) break;
    auto skip_to = [&](const char* end) -> bool {
      const std::size_t p = xml.find(end, lt);
      if (p == std::string::npos) return false;
      i = p + std::char_traits<char>::length(end);
      return true;
    };
    if (xml.compare(lt, 4, "<!--") == 0) {
      if (!skip_to("-->")) return "an unclosed comment";
      continue;
    }
    if (xml.compare(lt, 2, "<?") == 0) {
      if (!skip_to("?>")) return "an unclosed processing instruction";
      continue;
    }
    if (xml.compare(lt, 9, "<![CDATA[") == 0) {
      if (open.empty()) return "CDATA outside the root";
      if (!skip_to("]]>")) return "an unclosed CDATA section";
      continue;
    }
    if (xml.compare(lt, 9, "<!DOCTYPE") == 0) {
      if (roots > 0 || !open.empty()) return "a DOCTYPE after the root element";
      if (!skip_to(">")) return "an unclosed DOCTYPE";
      continue;
    }
    std::size_t p = lt + 1;
    const bool closing = p < xml.size() && xml[p] == '/';
    if (closing) ++p;
    if (p >= xml.size() || !name_start(xml[p])) return "a bad tag name at offset " + std::to_string(lt);
    const std::size_t name_begin = p;
    while (p < xml.size() && name_char(xml[p])) ++p;
    const std::string name = xml.substr(name_begin, p - name_begin);
    std::vector<std::string> attributes;
    bool self_closing = false;
    for (;;) {
      while (p < xml.size() && std::isspace(static_cast<unsigned char>(xml[p]))) ++p;
      if (p >= xml.size()) return "an unclosed tag <" + name;
      if (xml[p] == '>') break;
      if (!closing && xml.compare(p, 2, "/>") == 0) {
        self_closing = true;
        ++p;
        break;
      }
      if (closing || !name_start(xml[p])) return "a bad attribute in <" + name + " at offset " + std::to_string(p);
      const std::size_t a = p;
      while (p < xml.size() && name_char(xml[p])) ++p;
      const std::string attribute = xml.substr(a, p - a);
      for (const auto& seen : attributes)
        if (seen == attribute) return "attribute " + attribute + " twice in <" + name;
      attributes.push_back(attribute);
      while (p < xml.size() && std::isspace(static_cast<unsigned char>(xml[p]))) ++p;
      if (p >= xml.size() || xml[p] != '=') return "attribute " + attribute + " of <" + name + " has no value";
      ++p;
      while (p < xml.size() && std::isspace(static_cast<unsigned char>(xml[p]))) ++p;
      if (p >= xml.size() || (xml[p] != '"' && xml[p] != '\'')) return "attribute " + attribute + " is not quoted";
      const char quote = xml[p];
      const std::size_t value_end = xml.find(quote, p + 1);
      if (value_end == std::string::npos) return "attribute " + attribute + " is not closed";
      if (xml.find('<', p + 1) < value_end) return "a '<' inside attribute " + attribute;
      if (std::string e = check_text(xml, p + 1, value_end); !e.empty()) return e;
      p = value_end + 1;
    }
    i = p + 1;
    if (closing) {
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes " + (open.empty() ? std::string("nothing") : "<" + open.back() + ">");
      open.pop_back();
    } else {
      if (open.empty() && ++roots > 1) return "a second root element <" + name + ">";
      if (!self_closing) open.push_back(name);
    }
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (roots != 1) return "no root element";
  return "";
}

// The value of `attribute` in every element that starts with `start` (e.g.
// "<polyline class=\"train-loss\""), in document order.
inline std::vector<std::string> attribute_values(const std::string& xml, const std::string& start,
                                                 const std::string& attribute) {
  std::vector<std::string> out;
  for (std::size_t p = xml.find(start); p != std::string::npos; p = xml.find(start, p + 1)) {
    const std::size_t end = xml.find('>', p);
    const std::string key = " " + attribute + "=\"";
    const std::size_t a = xml.find(key, p);
    if (a == std::string::npos || a > end) continue;
    const std::size_t v = a + key.size();
    out.push_back(xml.substr(v, xml.find('"', v) - v));
  }
  return out;
}

// The points of an SVG polyline's `points` attribute ("x,y x,y ...").
inline std::vector<std::pair<double, double>> polyline_points(const std::string& points) {
  std::vector<std::pair<double, double>> out;
  std::size_t p = 0;
  while (p < points.size()) {
    while (p < points.size() && points[p] == ' ') ++p;
    if (p >= points.size()) break;
    std::size_t used = 0;
    const double x = std::stod(points.substr(p), &used);
    p += used + 1; // the comma
    const double y = std::stod(points.substr(p), &used);
    p += used;
    out.emplace_back(x, y);
  }
  return out;
}

} // namespace svg_check
