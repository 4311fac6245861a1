// CSV/TSV files (train/io/csv.h) and CsvDataset (train/data/csv_dataset.h): RFC 4180's quoting,
// line endings and the byte-order mark; every parse error with the file, line and column it
// names; the dataset's one-hot categories, class indices, standardisation, missing values
// (refused with line and column, or filled) and a test file read with the training file's
// encoding.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "temp_dir.h"
#include "train/data/csv_dataset.h"
#include "train/data/subset.h"
#include "train/io/csv.h"

using namespace dg;

namespace {

std::string write(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<std::string> row(const CsvTable& t, int64_t r) {
  std::vector<std::string> out;
  for (int64_t c = 0; c < t.width(); ++c) out.push_back(t.cell(r, c));
  return out;
}

// doctest::Contains of a message built at run time (it copies the text).
doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

void check_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
}

}  // namespace

TEST_CASE("CSV: quoted fields hold delimiters, doubled quotes and line breaks") {
  const std::string text =
      "name,note,n\n"
      "plain,\"a, b\",1\n"
      "\"say \"\"hi\"\"\",\"two\nlines\",2\n"
      "\n"  // a blank line is skipped (its line still counts)
      "last,\"\",3\n";
  const CsvTable t = parse_csv(text, "mem.csv");
  CHECK(t.columns == std::vector<std::string>{"name", "note", "n"});
  REQUIRE(t.rows() == 3);
  CHECK(row(t, 0) == std::vector<std::string>{"plain", "a, b", "1"});
  CHECK(row(t, 1) == std::vector<std::string>{"say \"hi\"", "two\nlines", "2"});
  CHECK(row(t, 2) == std::vector<std::string>{"last", "", "3"});
  CHECK(t.row_lines == std::vector<int64_t>{2, 3, 6});
  CHECK(t.line(1, 2) == 4);  // after the field with a line break
  CHECK(t.where(1, 2) == "mem.csv:4: column 3 'n'");
  CHECK(t.column_index("note") == 1);
  CHECK(t.column_index("nope") == -1);
  // A quote inside an unquoted field is a character (Python's csv, pandas).
  CHECK(parse_csv("a,b\nx\"y,2\n", "q.csv").cell(0, 0) == "x\"y");
}

TEST_CASE("CSV: CRLF, lone CR and LF read the same; a byte-order mark is skipped") {
  const CsvTable lf = parse_csv("a,b\n1,\"x\ny\"\n2,3\n", "lf.csv");
  const CsvTable crlf = parse_csv(
      "\xEF\xBB\xBF"
      "a,b\r\n1,\"x\ny\"\r\n2,3\r\n",
      "crlf.csv");
  const CsvTable cr = parse_csv("a,b\r1,\"x\ny\"\r2,3", "cr.csv");  // no final line break
  for (const CsvTable* t : {&crlf, &cr}) {
    CHECK(t->columns == lf.columns);  // the mark is not part of the first name
    CHECK(t->cells == lf.cells);
    CHECK(t->row_lines == lf.row_lines);
  }
  CHECK(lf.row_lines == std::vector<int64_t>{2, 4});
  // A CRLF inside a quoted field is kept as it is and counts as one line.
  const CsvTable kept = parse_csv("a,b\r\n\"x\r\ny\",1\r\n2,3\r\n", "k.csv");
  CHECK(kept.cell(0, 0) == "x\r\ny");
  CHECK(kept.row_lines == std::vector<int64_t>{2, 4});
}

TEST_CASE("CSV: the delimiter is the caller's or the extension's (.tsv: tab)") {
  const test::TempDir dir("csv");
  const std::string tsv = write(dir, "t.TSV", "a\tb\n1\t\"x\ty\"\n");
  const CsvTable t = read_csv(tsv);
  CHECK(t.delimiter == '\t');
  CHECK(row(t, 0) == std::vector<std::string>{"1", "x\ty"});
  CHECK(csv_delimiter_for("x.csv") == ',');
  CHECK(csv_delimiter_for("x.tsv") == '\t');
  CHECK(csv_delimiter_for("tsv") == ',');
  const std::string semi = write(dir, "s.csv", "a;b\n1;2\n");
  CHECK(row(read_csv(semi, ';'), 0) == std::vector<std::string>{"1", "2"});
  CHECK(read_csv(semi).width() == 1);  // with ',' the header is one column "a;b"
  CHECK_THROWS_WITH(parse_csv("a\n", "d.csv", '"'),
                    doctest::Contains("d.csv: the delimiter cannot be a quote or a line break"));
}

TEST_CASE("CSV: every error names the file, the line and the column") {
  // An unterminated quote: the line it opened on, its column's number and name.
  CHECK_THROWS_WITH(parse_csv("a,b,c\n1,2,3\n4,\"open,6\n7,8,9\n", "u.csv"),
                    doctest::Contains("u.csv:3: column 2 'b': unterminated quoted field"));
  CHECK_THROWS_WITH(parse_csv("a,\"b\n", "uh.csv"),
                    doctest::Contains("uh.csv:1: column 2: unterminated quoted field"));
  CHECK_THROWS_WITH(
      parse_csv("a,b\n\"x\"y,2\n", "after.csv"),
      doctest::Contains("after.csv:2: column 1 'a': text after the closing quote ('y')"));
  // Ragged rows: too few fields, too many, and after a field spanning two lines.
  CHECK_THROWS_WITH(parse_csv("a,b,c\n1,2,3\n4,5\n", "r.csv"),
                    doctest::Contains("r.csv:3: the row has 2 fields, the header has 3 columns: "
                                      "column 3 'c' is missing"));
  CHECK_THROWS_WITH(parse_csv("a,b,c\n1\n", "r1.csv"),
                    doctest::Contains("r1.csv:2: the row has 1 field, the header has 3 columns: "
                                      "column 2 'b' and after are missing"));
  CHECK_THROWS_WITH(parse_csv("a,b\n1,2\n3,4,5\n", "long.csv"),
                    doctest::Contains("long.csv:3: the row has 3 fields, the header has 2 columns: "
                                      "field 3 ('5') is past the last column 'b'"));
  CHECK_THROWS_WITH(parse_csv("a,b\n\"x\ny\",2,3\n", "ml.csv"),
                    doctest::Contains("ml.csv:3: the row has 3 fields"));
  // Empty, BOM only, blank lines only, header problems.
  CHECK_THROWS_WITH(parse_csv("", "e.csv"), doctest::Contains("e.csv: the file is empty"));
  CHECK_THROWS_WITH(parse_csv("\xEF\xBB\xBF", "bom.csv"),
                    doctest::Contains("bom.csv: the file is empty"));
  CHECK_THROWS_WITH(parse_csv("\n\r\n\n", "blank.csv"),
                    doctest::Contains("blank.csv: no header row (the file has only blank lines"));
  CHECK_THROWS_WITH(parse_csv("\na,,c\n1,2,3\n", "h.csv"),
                    doctest::Contains("h.csv:2: column 2: the header gives this column no name"));
  CHECK_THROWS_WITH(parse_csv("a,b,a\n", "dup.csv"),
                    doctest::Contains("dup.csv:1: column 3 'a': the header repeats the name of "
                                      "column 1"));
  const test::TempDir dir("csv");
  CHECK_THROWS_WITH(read_csv(dir.file("absent.csv")), doctest::Contains("absent.csv"));
}

TEST_CASE("CsvDataset: one-hot categories, sorted classes, features in column order") {
  const test::TempDir dir("csv");
  const std::string path = write(dir, "pets.csv",
                                 "age,colour,weight,kind\n"
                                 "3,red,4.5,10\n"
                                 "5,blue,+6,2\n"
                                 "1,red, 2.25 ,9\n"
                                 "7,green,8,10\n");
  const CsvDataset d = CsvDataset::read(path, {.label = "kind", .categorical = {"colour"}});
  const CsvEncoding& e = d.encoding();
  CHECK(d.size() == 4);
  CHECK(e.feature_count() == 5);
  CHECK(e.feature_names() ==
        std::vector<std::string>{"age", "colour=blue", "colour=green", "colour=red", "weight"});
  CHECK(e.classes == std::vector<std::string>{"2", "9", "10"});  // integers: by number
  CHECK(d.features().dtype() == DType::f32);
  CHECK(d.features().shape() == Shape{4, 5});
  CHECK(d.features().to_vector() == std::vector<double>{3, 0, 0, 1, 4.5,   //
                                                        5, 1, 0, 0, 6,     //
                                                        1, 0, 0, 1, 2.25,  //
                                                        7, 0, 1, 0, 8});
  CHECK(d.labels().dtype() == DType::i64);
  CHECK(d.labels().to_vector() == std::vector<double>{2, 0, 1, 2});
  Batch b;
  d.fill(std::vector<int64_t>{3, 1}, b);
  CHECK(b[1].to_vector() == std::vector<double>{2, 0});
  CHECK(b[0].shape() == Shape{2, 5});

  // Chosen features (in the order given), float64; string labels sort by their bytes.
  const std::string strings = write(dir, "s.csv", "x,y,label\n1,2,b\n3,4,B\n5,6,a\n");
  const CsvDataset s =
      CsvDataset::read(strings, {.label = "label", .features = {"y"}, .dtype = DType::f64});
  CHECK(s.encoding().classes == std::vector<std::string>{"B", "a", "b"});
  CHECK(s.features().dtype() == DType::f64);
  CHECK(s.features().to_vector() == std::vector<double>{2, 4, 6});
  CHECK(s.labels().to_vector() == std::vector<double>{2, 0, 1});
}

TEST_CASE("CsvDataset: regression labels are numbers; a TSV reads the same") {
  const test::TempDir dir("csv");
  const std::string path = write(dir, "r.tsv", "a\tb\ty\n1\t2\t0.5\n3\t4\t-1.5\n");
  const CsvDataset d = CsvDataset::read(path, {.label = "y", .task = CsvTask::regression});
  CHECK(d.labels().dtype() == DType::f32);
  CHECK(d.labels().to_vector() == std::vector<double>{0.5, -1.5});
  CHECK(d.features().to_vector() == std::vector<double>{1, 2, 3, 4});
  CHECK(d.encoding().classes.empty());
}

TEST_CASE("CsvDataset: standardisation with this file's mean and population std") {
  const test::TempDir dir("csv");
  const std::string path = write(dir, "st.csv", "a,flat,c,y\n1,5,x,0\n2,5,y,1\n3,5,x,0\n6,5,y,1\n");
  const CsvDataset d =
      CsvDataset::read(path, {.label = "y", .categorical = {"c"}, .standardize = true});
  const CsvFeatureColumn& a = d.encoding().columns[0];
  CHECK(a.mean == 3.0);
  CHECK(a.std == doctest::Approx(std::sqrt(3.5)));  // ddof 0: (4 + 1 + 0 + 9) / 4
  CHECK(d.encoding().columns[1].std == 1.0);        // a constant column: centred only
  CHECK(d.encoding().standardized);
  const double s = std::sqrt(3.5);
  check_near(d.features().to_vector(),
             {-2 / s, 0, 1, 0, -1 / s, 0, 0, 1, 0, 0, 1, 0, 3 / s, 0, 0, 1}, 1e-6);
  CsvDataset again = CsvDataset::read(path, {.label = "y", .categorical = {"c"}});
  again.standardize();
  CHECK(again.features().to_vector() == d.features().to_vector());
  CHECK_THROWS_WITH(again.standardize(), doctest::Contains("standardised already"));
}

TEST_CASE("CsvDataset: a missing value is refused with its file, line and column") {
  const test::TempDir dir("csv");
  const std::string path = write(dir, "m.csv",
                                 "a,b,c,y\n"
                                 "1,\"multi\nline\",2,p\n"
                                 "3,x,NA,q\n");
  const CsvDatasetOptions options{.label = "y", .categorical = {"b"}};
  CHECK_THROWS_WITH(CsvDataset::read(path, options),
                    has(path + ":4: column 3 'c': missing value ('NA'); missing "
                               "values are refused unless"));
  const std::string empty = write(dir, "e.csv", "a,y\n1,p\n,q\n");
  CHECK_THROWS_WITH(CsvDataset::read(empty, {.label = "y"}),
                    has(empty + ":3: column 1 'a': missing value (an empty field)"));
  // pandas' list, case as pandas: "null" and "None" are missing, "Null" is a (bad) number.
  for (const char* na : {"null", "None", "NaN", "nan", "#N/A", "<NA>", "n/a", "-1.#IND"}) {
    CAPTURE(na);
    CHECK(is_missing_value(na));
  }
  CHECK_FALSE(is_missing_value("Null"));
  CHECK_FALSE(is_missing_value("none"));
  CHECK_FALSE(is_missing_value(" NA"));
  const std::string bad = write(dir, "b.csv", "a,y\n1,p\nNull,q\n");
  CHECK_THROWS_WITH(CsvDataset::read(bad, {.label = "y"}),
                    has(bad + ":3: column 1 'a': 'Null' is not a finite number (a "
                              "numeric feature"));
  const std::string inf = write(dir, "i.csv", "a,y\ninf,p\n");
  CHECK_THROWS_WITH(CsvDataset::read(inf, {.label = "y"}),
                    doctest::Contains("'inf' is not a finite number"));
  // Categories and labels are never filled, even when numeric features are.
  const std::string cat = write(dir, "c.csv", "a,b,y\n1,u,p\n2,,q\n");
  CHECK_THROWS_WITH(
      CsvDataset::read(cat, {.label = "y", .categorical = {"b"}, .missing = CsvMissing::mean}),
      has(cat + ":3: column 2 'b': missing value (an empty field); categorical "
                "fields are never filled"));
  const std::string lab = write(dir, "l.csv", "a,y\n1,p\n2,NULL\n");
  CHECK_THROWS_WITH(CsvDataset::read(lab, {.label = "y", .missing = CsvMissing::mean}),
                    has(lab + ":3: column 2 'y': missing value ('NULL'); labels "
                              "are never filled"));
  const std::string reg = write(dir, "rg.csv", "a,y\n1,2\n2,x\n");
  CHECK_THROWS_WITH(CsvDataset::read(reg, {.label = "y", .task = CsvTask::regression}),
                    has(reg + ":3: column 2 'y': 'x' is not a finite number (the "
                              "regression label)"));
}

TEST_CASE("CsvDataset: missing numeric values filled with the column's mean or a constant") {
  const test::TempDir dir("csv");
  const std::string path = write(dir, "f.csv", "a,b,y\n1,10,p\nNA,20,q\n5,,p\n");
  const CsvDataset mean = CsvDataset::read(path, {.label = "y", .missing = CsvMissing::mean});
  CHECK(mean.features().to_vector() == std::vector<double>{1, 10, 3, 20, 5, 15});
  CHECK(mean.encoding().columns[0].fill == 3.0);
  const CsvDataset constant =
      CsvDataset::read(path, {.label = "y", .missing = CsvMissing::constant, .fill_value = -1});
  CHECK(constant.features().to_vector() == std::vector<double>{1, 10, -1, 20, 5, -1});
  CHECK_THROWS_WITH(
      CsvDataset::read(path,
                       {.label = "y", .missing = CsvMissing::constant, .fill_value = std::nan("")}),
      doctest::Contains("fill_value nan is not a finite number"));
  const std::string none = write(dir, "n.csv", "a,y\nNA,p\n,q\n");
  CHECK_THROWS_WITH(CsvDataset::read(none, {.label = "y", .missing = CsvMissing::mean}),
                    doctest::Contains("column 1 'a' has no values at all"));
}

TEST_CASE("CsvDataset: a test file read with the training file's encoding and statistics") {
  const test::TempDir dir("csv");
  const std::string train_path = write(dir, "train.csv",
                                       "x,colour,z,label\n"
                                       "0,red,1,no\n"
                                       "2,blue,NA,yes\n"
                                       "4,red,3,no\n"
                                       "10,blue,5,yes\n");
  CsvDataset train = CsvDataset::read(
      train_path, {.label = "label", .categorical = {"colour"}, .missing = CsvMissing::mean});
  // Statistics from the training part of a split only (rows 0 and 2: x 0 and 4, z 1 and 3).
  train.standardize(std::vector<int64_t>{0, 2});
  const CsvEncoding& e = train.encoding();
  CHECK(e.columns[0].mean == 2.0);
  CHECK(e.columns[0].std == 2.0);
  CHECK(e.columns[2].mean == 2.0);
  CHECK(e.columns[2].fill == 3.0);  // the whole file's mean of z, filled before standardising
  CHECK(train.features().to_vector() == std::vector<double>{-1, 0, 1, -1,  //
                                                            0, 1, 0, 1,    //
                                                            1, 0, 1, 1,    //
                                                            4, 1, 0, 3});

  // Columns in another order, an extra column ignored, a missing value filled with train's fill.
  const std::string test_path = write(dir, "test.csv",
                                      "label,extra,z,colour,x\n"
                                      "yes,?,NA,blue,4\n"
                                      "no,?,5,red,0\n");
  const CsvDataset test = CsvDataset::read(test_path, e);
  CHECK(test.features().to_vector() == std::vector<double>{1, 1, 0, 1,  //
                                                           -1, 0, 1, 3});
  CHECK(test.labels().to_vector() == std::vector<double>{1, 0});
  CHECK(test.encoding().standardized);
  // The same rows read as a test file get the training rows' bits.
  const CsvDataset same = CsvDataset::read(train_path, e);
  CHECK(same.features().to_vector() == train.features().to_vector());

  // The encoding through JSON (another program reading test files later) reads the same bits.
  const CsvEncoding loaded = CsvEncoding::from_json(json::parse(json::dump(e.to_json()), "e"));
  CHECK(loaded.feature_names() == e.feature_names());
  CHECK(loaded.to_json() == e.to_json());
  CHECK(CsvDataset::read(test_path, loaded).features().to_vector() == test.features().to_vector());
  json::Value broken = e.to_json();
  broken["task"] = "ranking";
  CHECK_THROWS_WITH(CsvEncoding::from_json(broken),
                    doctest::Contains("CSV encoding (JSON): task 'ranking' is neither"));
  broken = e.to_json();
  broken["columns"].as_array()[0]["std"] = 0.0;
  CHECK_THROWS_WITH(CsvEncoding::from_json(broken),
                    doctest::Contains("column 'x': std 0 is not positive"));
  CHECK_THROWS_WITH(CsvEncoding::from_json(json::Value()),
                    doctest::Contains("CSV encoding (JSON)"));

  // Unseen categories and classes are refused, not mapped to zeros; a missing column is named.
  const std::string unseen = write(dir, "u.csv", "x,colour,z,label\n1,green,1,no\n");
  CHECK_THROWS_WITH(CsvDataset::read(unseen, e),
                    has(unseen + ":2: column 2 'colour': 'green' is not one of the "
                                 "encoding's categories (blue, red)"));
  const std::string unseen_class = write(dir, "uc.csv", "x,colour,z,label\n1,red,1,maybe\n");
  CHECK_THROWS_WITH(CsvDataset::read(unseen_class, e),
                    has(unseen_class + ":2: column 4 'label': 'maybe' is not one of "
                                       "the encoding's classes (no, yes)"));
  const std::string lacking = write(dir, "lack.csv", "x,colour,label\n1,red,no\n");
  CHECK_THROWS_WITH(CsvDataset::read(lacking, e),
                    has(lacking + ": no column 'z' (a feature of the encoding); the "
                                  "header has: x, colour, label"));
  const std::string header_only = write(dir, "h.csv", "x,colour,z,label\n");
  CHECK_THROWS_WITH(CsvDataset::read(header_only, e),
                    has(header_only + ": no data rows after the header"));
}

TEST_CASE("CsvDataset: options that do not fit the file are refused") {
  const test::TempDir dir("csv");
  const std::string path = write(dir, "o.csv", "a,b,y\n1,2,p\n");
  CHECK_THROWS_WITH(CsvDataset::read(path, CsvDatasetOptions{}),
                    doctest::Contains("no label column given"));
  CHECK_THROWS_WITH(CsvDataset::read(path, {.label = "c"}),
                    has(path + ": no column 'c' (the label); the header has: a, b, y"));
  CHECK_THROWS_WITH(CsvDataset::read(path, {.label = "y", .features = {"a", "q"}}),
                    has(path + ": no column 'q' (a feature)"));
  CHECK_THROWS_WITH(CsvDataset::read(path, {.label = "y", .features = {"a", "y"}}),
                    doctest::Contains("'y' is the label; it cannot be a feature too"));
  CHECK_THROWS_WITH(CsvDataset::read(path, {.label = "y", .features = {"a", "a"}}),
                    doctest::Contains("feature 'a' is named twice"));
  CHECK_THROWS_WITH(
      CsvDataset::read(path, {.label = "y", .features = {"a"}, .categorical = {"b"}}),
      doctest::Contains("'b' is named categorical but is not a feature (features: a)"));
  CHECK_THROWS_WITH(CsvDataset::read(path, {.label = "y", .dtype = DType::i64}),
                    doctest::Contains("dtype int64 asked; features are float32 or float64"));
  const std::string only_label = write(dir, "ol.csv", "y\np\n");
  CHECK_THROWS_WITH(CsvDataset::read(only_label, {.label = "y"}),
                    doctest::Contains("has no feature columns (only the label 'y')"));
  const std::string no_rows = write(dir, "nr.csv", "a,y\n");
  CHECK_THROWS_WITH(CsvDataset::read(no_rows, {.label = "y"}),
                    has(no_rows + ": no data rows after the header"));
  CsvDataset d = CsvDataset::read(path, {.label = "y"});
  CHECK_THROWS_WITH(d.standardize(std::vector<int64_t>{1}),
                    doctest::Contains("standardize: row 1 is outside [0, 1)"));
  // A ragged row reaches the dataset's caller as the reader's one line.
  const std::string ragged = write(dir, "rag.csv", "a,b,y\n1,2,p\n3,q\n");
  CHECK_THROWS_WITH(CsvDataset::read(ragged, {.label = "y"}),
                    has(ragged + ":3: the row has 2 fields, the header has 3"));
}

TEST_CASE("CsvDataset: a random_split's parts are datasets of its rows") {
  const test::TempDir dir("csv");
  std::string text = "x,y\n";
  for (int i = 0; i < 10; ++i) text += std::to_string(i) + "," + (i % 2 ? "odd" : "even") + "\n";
  const CsvDataset d = CsvDataset::read(write(dir, "s.csv", text), {.label = "y"});
  TorchGenerator g(0);
  const std::vector<Subset> parts = random_split(d, {0.7, 0.3}, &g);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].size() == 7);
  Batch b;
  parts[1].fill(std::vector<int64_t>{0, 1, 2}, b);
  for (int64_t k = 0; k < 3; ++k) {
    const int64_t row = parts[1].indices()[static_cast<size_t>(k)];
    CHECK(b[0].to_vector()[static_cast<size_t>(k)] == static_cast<double>(row));
    CHECK(b[1].to_vector()[static_cast<size_t>(k)] == static_cast<double>(row % 2));
  }
}
