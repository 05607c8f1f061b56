// maglbctl's one report writer: what a command found, as titled tables with
// notes, printed as aligned text or as JSON. `table`, `diff`, `analyze` (and
// `stats`) build a Report and print it; none formats columns itself.
#ifndef MAGLB_CTL_REPORT_H_
#define MAGLB_CTL_REPORT_H_

#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace maglb::report {

/// One cell: a text, or a number with the digits its text shows. A number that
/// is not finite (NaN: "no figure") prints as "-" and as JSON null.
struct Cell {
  enum class Kind { kText, kNumber, kPercent };
  Kind kind = Kind::kText;
  std::string text;
  double number = 0;
  int digits = 0;          ///< after the decimal point, in text; 0 = an integer, also in JSON
  bool show_sign = false;  ///< percent: "+1.000%" / "-1.000%"
};

/// A text cell.
Cell Str(std::string text);
/// A figure printed with `digits` decimals (JSON: 9 significant digits).
Cell Num(double value, int digits = 4);
/// A count: no decimals, in text and in JSON.
Cell Int(double value);
/// A fraction printed as a percentage, "12.345%" (JSON: the fraction itself).
Cell Percent(double fraction, int digits = 3);
/// As Percent, always with its sign: "+12.345%", "-0.500%".
Cell SignedPercent(double fraction, int digits = 3);

enum class Align { kLeft, kRight };

struct Column {
  std::string name;  ///< the JSON key; also the text heading unless `heading` is set
  Align align = Align::kRight;
  /// Text: the least width. With Report::fit_columns the widest cell (or the
  /// heading) widens the whole column; without, a wider cell only pushes its
  /// own line on, as printf's "%-24s" does.
  size_t width = 0;
  std::string gap = " ";  ///< text printed before the column
  /// The text heading; `name` when unset. "" leaves the heading blank.
  std::optional<std::string> heading;
};

/// The usual columns of a figures table: the first names the row (left
/// aligned), the others hold figures (right aligned).
std::vector<Column> Columns(std::initializer_list<std::string_view> names);

/// A column at least `width` wide (see Column::width).
Column FixedColumn(std::string name, Align align, size_t width);

struct Table {
  std::string id;     ///< a stable key for scripts (JSON only)
  std::string title;  ///< the table's first line (none when empty)
  std::vector<std::string> notes;   ///< lines between the title and the columns
  std::vector<Column> columns;      ///< none: no heading line, no rows
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> footer;  ///< lines after the rows (JSON: appended to "notes")
};

struct Report {
  std::vector<Table> tables;
  // Text layout.
  std::string title_prefix;          ///< before each title, e.g. "== "
  std::string note_indent = "  ";    ///< before each note and footer line
  std::string row_indent = " ";      ///< before the heading and each row (then each column's gap)
  bool fit_columns = false;          ///< see Column::width
  bool blank_line_after_each = true; ///< else a blank line only between tables
};

/// A report of one table, in the default layout.
Report OneTable(Table table);

/// A cell as text: "-" for a missing figure.
std::string CellText(const Cell& cell);

/// The report as aligned text.
std::string RenderText(const Report& report);

/// The report as a JSON document: {"tables": [{"id", "title", "notes", "rows":
/// [{column: value}]}]}, keys in column order. Numbers keep their full
/// precision here.
nlohmann::ordered_json ToJson(const Report& report);

/// ToJson, written on a few lines: one per table head, one per row; numbers
/// with 9 significant digits (counts with none).
std::string RenderJson(const Report& report);

/// How InlineJson writes a value. The default is Python's json.dumps layout
/// with floats at 9 significant digits; `maglbctl stats` passes the daemon's
/// replies on as DPDK writes them (no space in arrays, numbers untouched).
struct InlineLayout {
  std::string_view array_separator = ", ";
  bool floats_as_nine_digits = true;  ///< else as nlohmann writes them
};

/// A JSON value on one line, with ": " after keys and ", " between fields.
/// Strings are escaped by nlohmann (invalid UTF-8 replaced, never an
/// exception); a float that is not finite is null.
std::string InlineJson(const nlohmann::ordered_json& value, const InlineLayout& layout = {});
std::string InlineJson(const nlohmann::json& value, const InlineLayout& layout = {});

enum class Format { kText, kJson };

/// Prints the report on `out` in `format`.
void Print(const Report& report, Format format, FILE* out = stdout);

}  // namespace maglb::report

#endif  // MAGLB_CTL_REPORT_H_
