// maglbctl's report writer: the text layouts its commands print, and JSON
// that any parser reads back (escaping by nlohmann, missing figures as null).
#include "ctl/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace maglb::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Table Figures() {
  Table t;
  t.id = "figures";
  t.title = "Figures";
  t.notes = {"a note"};
  t.columns = Columns({"scheme", "moved", "count"});
  t.rows = {{Str("maglev"), Num(0.25), Int(1234)}, {Str("modulo-long-name"), Num(kNaN), Int(7)}};
  return t;
}

TEST(ReportTest, CellsAsText) {
  EXPECT_EQ(CellText(Num(0.123456)), "0.1235");
  EXPECT_EQ(CellText(Num(2.0, 1)), "2.0");
  EXPECT_EQ(CellText(Int(41.6)), "42");
  EXPECT_EQ(CellText(Num(kNaN)), "-");
  EXPECT_EQ(CellText(Percent(0.333333)), "33.333%");
  EXPECT_EQ(CellText(SignedPercent(0.25)), "+25.000%");
  EXPECT_EQ(CellText(SignedPercent(-0.25)), "-25.000%");
}

TEST(ReportTest, FittedColumnsWidenToTheWidestCell) {
  Report r;
  r.tables = {Figures()};
  r.title_prefix = "== ";
  r.note_indent = "   ";
  r.fit_columns = true;
  EXPECT_EQ(RenderText(r),
            "== Figures\n"
            "   a note\n"
            "  scheme            moved count\n"
            "  maglev           0.2500  1234\n"
            "  modulo-long-name      -     7\n"
            "\n");
}

TEST(ReportTest, FixedColumnsPushOnlyTheirOwnLine) {
  Table t;
  t.title = "vip";
  t.columns = {FixedColumn("name", Align::kLeft, 6), FixedColumn("n", Align::kRight, 3)};
  Column remark = FixedColumn("remark", Align::kLeft, 0);
  remark.gap = "";
  remark.heading = "";
  t.columns.push_back(remark);
  t.rows = {{Str("a"), Int(1), Str("")}, {Str("longer-name"), Int(2), Str("  draining")}};
  t.footer = {"done"};
  EXPECT_EQ(RenderText(OneTable(t)),
            "vip\n"
            "  name     n\n"
            "  a        1\n"
            "  longer-name   2  draining\n"
            "  done\n"
            "\n");
}

TEST(ReportTest, BlankLinesBetweenTablesOnly) {
  Report r;
  Table a, b;
  a.title = "first";
  b.title = "second";
  b.notes = {"note"};
  r.tables = {a, b};
  r.blank_line_after_each = false;
  EXPECT_EQ(RenderText(r), "first\n\nsecond\n  note\n");
}

TEST(ReportTest, JsonKeepsColumnOrderAndMarksMissingFigures) {
  Report r;
  r.tables = {Figures()};
  EXPECT_EQ(RenderJson(r),
            "{\"tables\": [\n"
            " {\"id\": \"figures\", \"title\": \"Figures\",\n"
            "  \"notes\": [\"a note\"],\n"
            "  \"rows\": [\n"
            "   {\"scheme\": \"maglev\", \"moved\": 0.25, \"count\": 1234},\n"
            "   {\"scheme\": \"modulo-long-name\", \"moved\": null, \"count\": 7}]}\n"
            "]}\n");
  nlohmann::json back = nlohmann::json::parse(RenderJson(r));
  EXPECT_EQ(back["tables"][0]["rows"][0]["count"], 1234);
  EXPECT_TRUE(back["tables"][0]["rows"][1]["moved"].is_null());
}

TEST(ReportTest, JsonEscapesEveryString) {
  Table t;
  t.id = "vip:\"quoted\"\\";
  t.title = "tab\there\nnewline \x01 and bad UTF-8 \xff";
  Report r;
  r.tables = {t};
  nlohmann::json back = nlohmann::json::parse(RenderJson(r));  // throws if invalid
  EXPECT_EQ(back["tables"][0]["id"], "vip:\"quoted\"\\");
  EXPECT_EQ(back["tables"][0]["title"], "tab\there\nnewline \x01 and bad UTF-8 \xEF\xBF\xBD");
}

TEST(ReportTest, InlineJsonFloatsWithNineDigits) {
  nlohmann::ordered_json v = {{"b", 1.0 / 3}, {"a", {1, 2}}, {"s", "x"}, {"n", nullptr}};
  EXPECT_EQ(InlineJson(v), "{\"b\": 0.333333333, \"a\": [1, 2], \"s\": \"x\", \"n\": null}");
  EXPECT_EQ(InlineJson(nlohmann::json(2.0)), "2");
  EXPECT_EQ(InlineJson(nlohmann::json(1e-5)), "1e-05");
}

}  // namespace
}  // namespace maglb::report
