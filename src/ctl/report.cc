#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_format.h"

namespace maglb::report {

Cell Str(std::string text) { return {Cell::Kind::kText, std::move(text), 0, 0, false}; }
Cell Num(double value, int digits) { return {Cell::Kind::kNumber, "", value, digits, false}; }
Cell Int(double value) { return {Cell::Kind::kNumber, "", value, 0, false}; }
Cell Percent(double fraction, int digits) {
  return {Cell::Kind::kPercent, "", fraction, digits, false};
}
Cell SignedPercent(double fraction, int digits) {
  return {Cell::Kind::kPercent, "", fraction, digits, true};
}

std::vector<Column> Columns(std::initializer_list<std::string_view> names) {
  std::vector<Column> out;
  for (std::string_view n : names) {
    Column c;
    c.name = std::string(n);
    c.align = out.empty() ? Align::kLeft : Align::kRight;
    out.push_back(std::move(c));
  }
  return out;
}

Column FixedColumn(std::string name, Align align, size_t width) {
  Column c;
  c.name = std::move(name);
  c.align = align;
  c.width = width;
  return c;
}

Report OneTable(Table table) {
  Report r;
  r.tables.push_back(std::move(table));
  return r;
}

std::string CellText(const Cell& cell) {
  switch (cell.kind) {
    case Cell::Kind::kText:
      return cell.text;
    case Cell::Kind::kNumber:
      if (!std::isfinite(cell.number)) return "-";
      return absl::StrFormat("%.*f", cell.digits, cell.number);
    case Cell::Kind::kPercent:
      if (!std::isfinite(cell.number)) return "-";
      return cell.show_sign ? absl::StrFormat("%+.*f%%", cell.digits, 100.0 * cell.number)
                            : absl::StrFormat("%.*f%%", cell.digits, 100.0 * cell.number);
  }
  return "";
}

namespace {

const std::string& Heading(const Column& c) { return c.heading ? *c.heading : c.name; }

// Appends `s` padded to `width` (printf's "%-*s" or "%*s": never cut).
void AppendPadded(std::string* out, std::string_view s, size_t width, Align align) {
  const size_t pad = width > s.size() ? width - s.size() : 0;
  if (align == Align::kRight) out->append(pad, ' ');
  out->append(s);
  if (align == Align::kLeft) out->append(pad, ' ');
}

void AppendColumns(std::string* out, const Table& t, const Report& r) {
  // Every cell's text once: the widths need them before the first line.
  std::vector<std::vector<std::string>> text;
  for (const std::vector<Cell>& row : t.rows) {
    std::vector<std::string>& line = text.emplace_back();
    for (size_t c = 0; c < t.columns.size(); ++c) {
      line.push_back(c < row.size() ? CellText(row[c]) : std::string());
    }
  }
  std::vector<size_t> width;
  for (size_t c = 0; c < t.columns.size(); ++c) {
    size_t w = t.columns[c].width;
    if (r.fit_columns) {
      w = std::max(w, Heading(t.columns[c]).size());
      for (const std::vector<std::string>& line : text) w = std::max(w, line[c].size());
    }
    width.push_back(w);
  }
  auto append_line = [&](auto cell_text) {
    out->append(r.row_indent);
    for (size_t c = 0; c < t.columns.size(); ++c) {
      out->append(t.columns[c].gap);
      AppendPadded(out, cell_text(c), width[c], t.columns[c].align);
    }
    out->push_back('\n');
  };
  append_line([&](size_t c) -> std::string_view { return Heading(t.columns[c]); });
  for (const std::vector<std::string>& line : text) {
    append_line([&](size_t c) -> std::string_view { return line[c]; });
  }
}

nlohmann::ordered_json CellJson(const Cell& cell) {
  if (cell.kind == Cell::Kind::kText) return cell.text;
  if (!std::isfinite(cell.number)) return nullptr;
  // A count is an integer in JSON as in text (rounded as printf's "%.0f").
  if (cell.kind == Cell::Kind::kNumber && cell.digits == 0) {
    return static_cast<int64_t>(std::nearbyint(cell.number));
  }
  return cell.number;
}

template <typename Json>
void AppendInline(std::string* out, const Json& v, const InlineLayout& layout = {}) {
  switch (v.type()) {
    case nlohmann::json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const Json& item : v) {
        if (!first) out->append(layout.array_separator);
        first = false;
        AppendInline(out, item, layout);
      }
      out->push_back(']');
      return;
    }
    case nlohmann::json::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out->append(", ");
        first = false;
        AppendInline(out, Json(key), layout);
        out->append(": ");
        AppendInline(out, item, layout);
      }
      out->push_back('}');
      return;
    }
    case nlohmann::json::value_t::number_float:
      if (!std::isfinite(v.template get<double>())) {
        out->append("null");
        return;
      }
      if (layout.floats_as_nine_digits) {
        out->append(absl::StrFormat("%.9g", v.template get<double>()));
        return;
      }
      break;
    default:
      break;
  }
  out->append(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

std::string RenderText(const Report& report) {
  std::string out;
  for (size_t i = 0; i < report.tables.size(); ++i) {
    const Table& t = report.tables[i];
    if (!report.blank_line_after_each && i > 0) out.push_back('\n');
    if (!t.title.empty()) {
      out.append(report.title_prefix);
      out.append(t.title);
      out.push_back('\n');
    }
    for (const std::string& n : t.notes) {
      out.append(report.note_indent);
      out.append(n);
      out.push_back('\n');
    }
    if (!t.columns.empty()) AppendColumns(&out, t, report);
    for (const std::string& n : t.footer) {
      out.append(report.note_indent);
      out.append(n);
      out.push_back('\n');
    }
    if (report.blank_line_after_each) out.push_back('\n');
  }
  return out;
}

nlohmann::ordered_json ToJson(const Report& report) {
  nlohmann::ordered_json tables = nlohmann::ordered_json::array();
  for (const Table& t : report.tables) {
    nlohmann::ordered_json notes = nlohmann::ordered_json::array();
    for (const std::string& n : t.notes) notes.push_back(n);
    for (const std::string& n : t.footer) notes.push_back(n);
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const std::vector<Cell>& row : t.rows) {
      nlohmann::ordered_json fields = nlohmann::ordered_json::object();
      for (size_t c = 0; c < t.columns.size() && c < row.size(); ++c) {
        fields[t.columns[c].name] = CellJson(row[c]);
      }
      rows.push_back(std::move(fields));
    }
    tables.push_back({{"id", t.id}, {"title", t.title}, {"notes", std::move(notes)},
                      {"rows", std::move(rows)}});
  }
  return {{"tables", std::move(tables)}};
}

std::string RenderJson(const Report& report) {
  // One line per table head and per row: readable, and diffable line by line.
  nlohmann::ordered_json doc = ToJson(report);
  std::string out = "{\"tables\": [";
  bool first_table = true;
  for (const nlohmann::ordered_json& t : doc["tables"]) {
    out.append(first_table ? "\n" : ",\n");
    first_table = false;
    out.append(" {\"id\": ");
    AppendInline(&out, t["id"]);
    out.append(", \"title\": ");
    AppendInline(&out, t["title"]);
    out.append(",\n  \"notes\": ");
    AppendInline(&out, t["notes"]);
    out.append(",\n  \"rows\": [\n   ");
    bool first_row = true;
    for (const nlohmann::ordered_json& row : t["rows"]) {
      if (!first_row) out.append(",\n   ");
      first_row = false;
      AppendInline(&out, row);
    }
    out.append("]}");
  }
  out.append("\n]}\n");
  return out;
}

std::string InlineJson(const nlohmann::ordered_json& value, const InlineLayout& layout) {
  std::string out;
  AppendInline(&out, value, layout);
  return out;
}

std::string InlineJson(const nlohmann::json& value, const InlineLayout& layout) {
  std::string out;
  AppendInline(&out, value, layout);
  return out;
}

void Print(const Report& report, Format format, FILE* out) {
  std::string text = format == Format::kJson ? RenderJson(report) : RenderText(report);
  std::fwrite(text.data(), 1, text.size(), out);
}

}  // namespace maglb::report
