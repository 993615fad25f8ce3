// memory_map: the base MemoryPlan of a compiled job as a self-contained SVG and as a text summary (`fresco
// plan`). Invariants: every DTensor of the base plan is drawn exactly once, as a box whose data-tensor-id and
// data-offset are the plan's; the vertical axis is the address and is monotone, to scale except for pieces
// shorter than kMinPiece pixels (stated in the legend), so boxes that share bytes (F region) share rows.
// Tested by tests/core/test_inspect.cpp.
#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "fresco/core/error.h"
#include "fresco/core/inspect.h"

namespace fresco {

namespace {

constexpr int kFamilyCount = static_cast<int>(Family::R) + 1;

// Picture geometry (pixels).
constexpr double kWidth = 1120;
constexpr double kAddrX = 12;   // left column: hex offsets
constexpr double kBandX = 112;  // the address bands
constexpr double kBandW = 600;
constexpr double kInfoX = 726;       // right column: region names and sizes
constexpr double kMapHeight = 1100;  // the arena's bytes, to scale, before minimum heights are added
constexpr double kMinPiece = 12;     // shortest drawn piece between two tensor or region boundaries
constexpr double kEmptyLine = 11;    // one text line of an empty-region label
constexpr size_t kEmptyWrap = 62;    // characters per line of an empty-region label

std::string strf(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  const int n = std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  if (n < 0) return {};
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string s(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, f);
  std::vsnprintf(s.data(), s.size(), f, ap);
  va_end(ap);
  s.resize(static_cast<size_t>(n));
  return s;
}

std::string with_commas(uint64_t v) {
  std::string d = std::to_string(v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

std::string human(uint64_t b) {
  if (b >= (1ull << 30)) return strf("%.2f GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return strf("%.2f MiB", static_cast<double>(b) / (1ull << 20));
  if (b >= (1ull << 10)) return strf("%.1f KiB", static_cast<double>(b) / (1ull << 10));
  return strf("%llu B", static_cast<unsigned long long>(b));
}

// "7,680 B (7.5 KiB)", or "512 B" below 1 KiB.
std::string bytes_label(uint64_t b) {
  return b < 1024 ? with_commas(b) + " B" : with_commas(b) + " B (" + human(b) + ")";
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

double percent(uint64_t a, uint64_t b) {
  return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0;
}

std::string hex(uint64_t v) {
  return strf("0x%08llx", static_cast<unsigned long long>(v));
}

struct FamilyStyle {
  const char* colour;
  const char* what;
};
// Indexed by Family.
constexpr FamilyStyle kFamilyStyle[kFamilyCount] = {
    {"#8c564b", "BN running stats"},     {"#1f77b4", "master weights"},
    {"#17becf", "EMA weights"},          {"#9467bd", "low-precision weights"},
    {"#d62728", "FP32 gradients"},       {"#e7969c", "low-precision gradients"},
    {"#2ca02c", "first moments"},        {"#bcbd22", "second moments"},
    {"#7f7f7f", "LARS norms"},           {"#ff7f0e", "A/B input buffers"},
    {"#e377c2", "features + gradients"}, {"#393b79", "scalars, tables"},
    {"#8c6d31", "temporaries"},          {"#637939", "results"}};

const FamilyStyle& style_of(Region r) {
  return kFamilyStyle[static_cast<int>(region_family(r))];
}

const MemoryPlan& base_plan_of(const CompiledModel& m) {
  const auto& p = m.plans[static_cast<int>(Variant::TRAIN_BASE)];
  FRESCO_CHECK(p && p->finalized(), ErrorCode::kUsage,
               "memory map: the compiled model has no finalized train_base plan (call plan() first)");
  return *p;
}

std::string layer_name(const CompiledModel& m, int32_t layer) {
  if (layer < 0 || static_cast<size_t>(layer) >= m.arch.layers.size()) return "job";
  return m.arch.layers[static_cast<size_t>(layer)].name;
}

uint64_t shape_bytes(const DTensor& t) {
  return static_cast<uint64_t>(t.shape.numel()) * dtype_size(t.dtype);
}

struct FamilyTotal {
  int regions = 0, tensors = 0;
  uint64_t bytes = 0;
};
std::array<FamilyTotal, kFamilyCount> family_totals(const MemoryPlan& p) {
  std::array<FamilyTotal, kFamilyCount> f{};
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const auto r = static_cast<Region>(ri);
    FamilyTotal& t = f[static_cast<int>(region_family(r))];
    const uint64_t b = p.region(r).bytes;
    t.bytes += b;
    t.regions += b > 0 ? 1 : 0;
  }
  for (const DTensor& d : p.tensors()) ++f[static_cast<int>(region_family(d.region))].tensors;
  return f;
}

struct VariantTotal {
  Variant v;
  int64_t batch;
  uint64_t shape = 0, slots = 0;
  uint64_t batched_shape = 0, batched_slots = 0;  // the tensors whose shape.n is the batch
};
std::vector<VariantTotal> variant_totals(const CompiledModel& m) {
  std::vector<VariantTotal> out;
  for (int v = 0; v < kVariantCount; ++v) {
    if (!m.plans[v]) continue;
    VariantTotal t{static_cast<Variant>(v), m.batch_of[v]};
    for (const DTensor& d : m.plans[v]->tensors()) {
      t.shape += shape_bytes(d);
      t.slots += d.slot_bytes;
      if (d.batched) {
        t.batched_shape += shape_bytes(d);
        t.batched_slots += d.slot_bytes;
      }
    }
    out.push_back(t);
  }
  return out;
}

uint64_t arena_end(const MemoryPlan& p) {
  uint64_t end = 0;
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const RegionSpan s = p.region(static_cast<Region>(ri));
    end = std::max(end, s.offset + s.bytes);
  }
  return end;
}

// Consecutive empty regions (they share one address) form one labelled thin line.
struct EmptyGroup {
  uint64_t at;
  std::vector<std::string> lines;
  std::string all;
};
std::vector<EmptyGroup> empty_groups(const MemoryPlan& p) {
  std::vector<EmptyGroup> groups;
  bool open = false;
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const auto r = static_cast<Region>(ri);
    if (p.region(r).bytes != 0) {
      open = false;
      continue;
    }
    if (!open) groups.push_back({p.region(r).offset, {}, {}});
    open = true;
    EmptyGroup& g = groups.back();
    g.all += (g.all.empty() ? "" : ", ") + std::string(region_name(r));
  }
  for (EmptyGroup& g : groups) {  // wrap at commas
    std::string line = "0 B:";
    size_t pos = 0;
    while (pos < g.all.size()) {
      size_t next = g.all.find(", ", pos);
      if (next == std::string::npos) next = g.all.size();
      const std::string word = g.all.substr(pos, next - pos) + (next < g.all.size() ? "," : "");
      if (line.size() + 1 + word.size() > kEmptyWrap) {
        g.lines.push_back(line);
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
      pos = next + 2;
    }
    g.lines.push_back(line);
  }
  return groups;
}

// Address -> y: every boundary address gets (y before, y after) the label gap inserted there; between two
// consecutive boundaries the height is the bytes to scale, at least kMinPiece.
class AddressAxis {
 public:
  AddressAxis(const std::vector<uint64_t>& bounds, const std::map<uint64_t, double>& gaps, double y0,
              double scale) {
    double y = y0;
    bool first = true;
    uint64_t prev = 0;
    for (uint64_t a : bounds) {
      if (!first) y += std::max(kMinPiece, static_cast<double>(a - prev) * scale);
      first = false;
      const double before = y;
      auto g = gaps.find(a);
      if (g != gaps.end()) y += g->second;
      at_[a] = {before, y};
      prev = a;
    }
    end_ = y;
  }
  double top(uint64_t a) const { return at_.at(a).second; }    // where something starting at a begins
  double bottom(uint64_t a) const { return at_.at(a).first; }  // where something ending at a ends
  double gap_mid(uint64_t a) const { return (at_.at(a).first + at_.at(a).second) / 2; }
  double end() const { return end_; }

 private:
  std::map<uint64_t, std::pair<double, double>> at_;
  double end_ = 0;
};

// Cuts a label to what fits in `width` pixels at ~0.58 em per character.
std::string fit(const std::string& s, double width, double font) {
  const auto max_chars = static_cast<long>(width / (0.58 * font));
  if (max_chars <= 0) return {};
  if (static_cast<long>(s.size()) <= max_chars) return s;
  if (max_chars <= 3) return s.substr(0, static_cast<size_t>(max_chars));
  return s.substr(0, static_cast<size_t>(max_chars - 3)) + "...";
}

class Svg {
 public:
  void rect(double x, double y, double w, double h, const std::string& fill, double opacity,
            const std::string& stroke, const std::string& extra = {}) {
    body_ += strf(
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"%.2f\" "
        "stroke=\"%s\"%s%s/>\n",
        x, y, std::max(0.0, w), std::max(0.0, h), fill.c_str(), opacity, stroke.c_str(),
        extra.empty() ? "" : " ", extra.c_str());
  }
  void text(double x, double y, const std::string& s, double size = 10, const std::string& extra = {}) {
    body_ += strf("<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\"%s%s>", x, y, size, extra.empty() ? "" : " ",
                  extra.c_str()) +
             xml_escape(s) + "</text>\n";
  }
  void line(double x1, double y1, double x2, double y2, const std::string& stroke,
            const std::string& extra = {}) {
    body_ += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"%s%s/>\n", x1, y1, x2,
                  y2, stroke.c_str(), extra.empty() ? "" : " ", extra.c_str());
  }
  void raw(const std::string& s) { body_ += s; }
  std::string finish(double height) const {
    std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    s += strf(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
        "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
        kWidth, height, kWidth, height);
    s += strf("<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", kWidth, height);
    return s + body_ + "</svg>\n";
  }

 private:
  std::string body_;
};

// Lanes for one F region's tensors (in address order): first fit, so tensors that share bytes get different
// lanes and a lane never holds two overlapping slots.
std::vector<size_t> assign_lanes(const MemoryPlan& p, const std::vector<TensorId>& ids, size_t* lanes) {
  std::vector<uint64_t> lane_end;
  std::vector<size_t> lane_of(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const DTensor& t = p.tensor(ids[i]);
    size_t l = 0;
    while (l < lane_end.size() && lane_end[l] > static_cast<uint64_t>(t.offset)) ++l;
    if (l == lane_end.size()) lane_end.push_back(0);
    lane_end[l] = static_cast<uint64_t>(t.offset) + t.slot_bytes;
    lane_of[i] = l;
  }
  *lanes = std::max<size_t>(lane_end.size(), 1);
  return lane_of;
}

std::string tensor_tooltip(const CompiledModel& m, const DTensor& t) {
  std::string s = t.name + " (tensor id " + std::to_string(t.id) + ")\n";
  s += "layer: " + layer_name(m, t.layer) + (t.layer >= 0 ? " (index " + std::to_string(t.layer) + ")" : "") +
       "\n";
  s += std::string("region: ") + region_name(t.region) + "\n";
  s += "shape: " + t.shape.str() + " " + dtype_name(t.dtype) + "\n";
  s += "offset: " + hex(static_cast<uint64_t>(t.offset)) + " (" +
       with_commas(static_cast<uint64_t>(t.offset)) + ")\n";
  s += "slot bytes: " + with_commas(t.slot_bytes) + " (shape uses " + with_commas(shape_bytes(t)) + ")";
  if (region_family(t.region) == Family::F)
    s += "\nlive: steps " + std::to_string(t.live_begin) + ".." + std::to_string(t.live_end) + " of " +
         std::to_string(m.base_plan().lifetime_clock());
  return s;
}

void draw_tensor(Svg& svg, const CompiledModel& m, const DTensor& t, double x, double w, double y0, double y1,
                 bool lane) {
  const FamilyStyle& st = style_of(t.region);
  const double h = y1 - y0;
  svg.raw(strf("<g data-tensor-id=\"%d\" data-offset=\"%lld\" data-slot-bytes=\"%llu\">", t.id,
               static_cast<long long>(t.offset), static_cast<unsigned long long>(t.slot_bytes)));
  svg.raw("<title>" + xml_escape(tensor_tooltip(m, t)) + "</title>\n");
  svg.rect(x, y0, w, h, st.colour, 0.42, st.colour, "stroke-width=\"0.8\"");
  const double font = h >= 13 ? 10 : 8.5;
  std::string label = t.name;
  if (lane)
    label += "  live " + std::to_string(t.live_begin) + ".." + std::to_string(t.live_end);
  else
    label += "  " + t.shape.str() + " " + dtype_name(t.dtype) + "  " + human(t.slot_bytes);
  if (h >= 8) svg.text(x + 3, y0 + h / 2 + font * 0.35, fit(label, w - 6, font), font);
  svg.raw("</g>\n");
}

}  // namespace

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters other than tab and newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          out += '?';
        else
          out += c;
    }
  }
  return out;
}

std::string memory_map_svg(const CompiledModel& m) {
  const MemoryPlan& p = base_plan_of(m);
  const uint64_t end = arena_end(p);
  const uint64_t total = std::max(p.total_bytes(), end);
  const double scale = kMapHeight / static_cast<double>(std::max<uint64_t>(total, 1));
  const auto fam = family_totals(p);
  const auto vars = variant_totals(m);
  const auto groups = empty_groups(p);
  Svg svg;

  // Header: title, family colours, how to read the picture.
  double y = 26;
  int trainable = 0;
  for (const auto& l : m.arch.layers) trainable += l.weight != kNoTensor ? 1 : 0;
  svg.text(kAddrX, y, "fresco memory map: train_base plan", 17, "font-weight=\"bold\"");
  y += 20;
  svg.text(
      kAddrX, y,
      strf("%zu layers (%d with parameters, %s parameters), %zu tensors, arena %s bytes (%s) incl. %llu-byte "
           "tail guard",
           m.arch.layers.size(), trainable,
           with_commas(static_cast<uint64_t>(m.arch.parameter_count)).c_str(), p.size(),
           with_commas(total).c_str(), human(total).c_str(),
           static_cast<unsigned long long>(kTailGuardBytes)),
      11);
  y += 18;
  for (int f = 0; f < kFamilyCount; ++f) {
    const double x = kAddrX + (f % 5) * 212;
    const double yy = y + (f / 5) * 16;
    svg.rect(x, yy - 9, 12, 11, kFamilyStyle[f].colour, 0.42, kFamilyStyle[f].colour);
    svg.text(x + 16, yy, std::string(family_name(static_cast<Family>(f))) + " " + kFamilyStyle[f].what, 9.5,
             fam[f].bytes ? "" : "fill=\"#999999\"");
  }
  y += 52;
  svg.text(
      kAddrX, y,
      strf("Address grows downwards. To scale: 1 px = %s; pieces smaller than %.0f px are drawn %.0f px tall "
           "(not to scale). 0-byte regions: dashed thin lines.",
           human(static_cast<uint64_t>(1.0 / scale + 0.5)).c_str(), kMinPiece, kMinPiece),
      10);
  y += 14;
  svg.text(kAddrX, y,
           "F regions: tensors side by side (lanes) at the same height share bytes; their lifetimes (live "
           "a..b, steps of the training timeline) do not overlap. Hover a box for its details.",
           10);
  y += 22;

  // The address axis.
  std::vector<uint64_t> bounds = {0, end, total};
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const RegionSpan s = p.region(static_cast<Region>(ri));
    bounds.push_back(s.offset);
    bounds.push_back(s.offset + s.bytes);
  }
  for (const DTensor& t : p.tensors()) {
    bounds.push_back(static_cast<uint64_t>(t.offset));
    bounds.push_back(static_cast<uint64_t>(t.offset) + t.slot_bytes);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::map<uint64_t, double> gaps;
  for (const EmptyGroup& g : groups) gaps[g.at] += static_cast<double>(g.lines.size()) * kEmptyLine + 6;
  const AddressAxis ax(bounds, gaps, y, scale);

  // Empty regions: a dashed line and their names.
  for (const EmptyGroup& g : groups) {
    const double ym = ax.gap_mid(g.at);
    const double top = ym - static_cast<double>(g.lines.size()) * kEmptyLine / 2;
    svg.raw("<g><title>" + xml_escape("empty regions (0 bytes) at " + hex(g.at) + ": " + g.all) +
            "</title>\n");
    svg.line(kBandX, ym, kBandX + kBandW, ym, "#888888", "stroke-dasharray=\"4 3\" stroke-width=\"0.8\"");
    for (size_t i = 0; i < g.lines.size(); ++i)
      svg.text(kInfoX, top + 8.5 + static_cast<double>(i) * kEmptyLine, g.lines[i], 8.5,
               "fill=\"#777777\" font-style=\"italic\"");
    svg.raw("</g>\n");
  }

  // Non-empty regions and their tensors.
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const auto r = static_cast<Region>(ri);
    const RegionSpan s = p.region(r);
    if (s.bytes == 0) continue;
    const FamilyStyle& st = style_of(r);
    const double y0 = ax.top(s.offset), y1 = ax.bottom(s.offset + s.bytes);
    const std::vector<TensorId> ids = p.tensors_in(r);  // in address order
    const bool f = region_family(r) == Family::F;
    size_t lanes = 1;
    const std::vector<size_t> lane_of = f ? assign_lanes(p, ids, &lanes) : std::vector<size_t>(ids.size(), 0);
    std::string info = bytes_label(s.bytes) + ", " + plural(ids.size(), "tensor", "tensors");
    if (f && lanes > 1) info += " in " + std::to_string(lanes) + " lanes";
    svg.raw("<g data-region=\"" + xml_escape(region_name(r)) + "\"><title>" +
            xml_escape(std::string(region_name(r)) + " at " + hex(s.offset) + ": " + info) + "</title>\n");
    svg.rect(kBandX, y0, kBandW, y1 - y0, st.colour, 0.12, st.colour, "stroke-width=\"1.2\"");
    svg.line(kAddrX, y0, kBandX, y0, "#bbbbbb", "stroke-width=\"0.6\"");
    svg.text(kAddrX, y0 + 10, hex(s.offset), 9, "font-family=\"DejaVu Sans Mono, monospace\"");
    svg.text(kInfoX, y0 + 10.5, region_name(r), 10, "font-weight=\"bold\"");
    if (y1 - y0 >= 24)
      svg.text(kInfoX, y0 + 22, info, 9);
    else  // beside the name
      svg.text(kInfoX + 7.5 * static_cast<double>(std::string(region_name(r)).size()) + 8, y0 + 10.5, info,
               9);
    if (f && y1 - y0 >= 36) {
      uint64_t sum = 0;
      for (TensorId id : ids) sum += p.tensor(id).slot_bytes;
      if (sum > s.bytes)
        svg.text(kInfoX, y0 + 34, "slots add up to " + bytes_label(sum) + ": shared by liveness", 9,
                 "fill=\"#555555\"");
    }
    svg.raw("</g>\n");
    const double lw = (kBandW - 8) / static_cast<double>(lanes);
    for (size_t i = 0; i < ids.size(); ++i) {
      const DTensor& t = p.tensor(ids[i]);
      const uint64_t o = static_cast<uint64_t>(t.offset);
      if (f)
        draw_tensor(svg, m, t, kBandX + 4 + static_cast<double>(lane_of[i]) * lw, lw - 2, ax.top(o) + 1,
                    ax.bottom(o + t.slot_bytes) - 1, true);
      else
        draw_tensor(svg, m, t, kBandX + 6, kBandW - 12, ax.top(o) + 1, ax.bottom(o + t.slot_bytes) - 1,
                    false);
    }
  }
  // Tail guard and the end of the arena.
  if (total > end) {
    const double y0 = ax.top(end), y1 = ax.bottom(total);
    svg.rect(kBandX, y0, kBandW, y1 - y0, "#cccccc", 0.6, "#999999", "stroke-dasharray=\"2 2\"");
    svg.text(kAddrX, y0 + 10, hex(end), 9, "font-family=\"DejaVu Sans Mono, monospace\"");
    svg.text(kInfoX, y0 + 10, "tail guard, " + with_commas(total - end) + " B", 9, "fill=\"#555555\"");
  }
  y = ax.end() + 4;
  svg.text(kAddrX, y + 10, hex(total), 9, "font-family=\"DejaVu Sans Mono, monospace\"");
  svg.text(kInfoX, y + 10, "end of arena", 9, "fill=\"#555555\"");
  y += 40;

  // Tables: totals per family, then per present variant.
  auto row_bg = [&](double yy, int i) {
    if (i % 2 == 0) svg.rect(kAddrX, yy - 11, 815, 15, "#f2f2f2", 1.0, "none");
  };
  svg.text(kAddrX, y, "Totals per region family", 13, "font-weight=\"bold\"");
  y += 20;
  const double c1 = kAddrX + 4, c2 = kAddrX + 250, c3 = kAddrX + 330, c4 = kAddrX + 460, c5 = kAddrX + 560,
               c6 = kAddrX + 650;
  auto header = [&](std::initializer_list<std::pair<double, const char*>> cols) {
    for (const auto& [x, name] : cols)
      svg.text(x, y, name, 10, x == c1 ? "font-weight=\"bold\"" : "font-weight=\"bold\" text-anchor=\"end\"");
    y += 16;
  };
  header({{c1, "family"}, {c2, "regions"}, {c3, "tensors"}, {c4, "bytes"}, {c5, "size"}, {c6, "of arena"}});
  int row = 0;
  for (int f = 0; f < kFamilyCount; ++f) {
    if (fam[f].bytes == 0 && fam[f].tensors == 0) continue;
    row_bg(y, row++);
    svg.rect(c1, y - 9, 10, 10, kFamilyStyle[f].colour, 0.42, kFamilyStyle[f].colour);
    svg.text(c1 + 14, y, std::string(family_name(static_cast<Family>(f))) + "  " + kFamilyStyle[f].what, 10);
    svg.text(c2, y, std::to_string(fam[f].regions), 10, "text-anchor=\"end\"");
    svg.text(c3, y, std::to_string(fam[f].tensors), 10, "text-anchor=\"end\"");
    svg.text(c4, y, with_commas(fam[f].bytes), 10, "text-anchor=\"end\"");
    svg.text(c5, y, human(fam[f].bytes), 10, "text-anchor=\"end\"");
    svg.text(c6, y, strf("%.1f%%", percent(fam[f].bytes, total)), 10, "text-anchor=\"end\"");
    y += 15;
  }
  row_bg(y, row++);
  svg.text(c1 + 14, y, "arena (incl. tail guard)", 10, "font-weight=\"bold\"");
  svg.text(c3, y, std::to_string(p.size()), 10, "text-anchor=\"end\" font-weight=\"bold\"");
  svg.text(c4, y, with_commas(total), 10, "text-anchor=\"end\" font-weight=\"bold\"");
  svg.text(c5, y, human(total), 10, "text-anchor=\"end\" font-weight=\"bold\"");
  y += 32;

  svg.text(kAddrX, y,
           "Variants: bytes the shapes use vs the slot bytes (slots are sized for the largest batch)", 13,
           "font-weight=\"bold\"");
  y += 20;
  const double d4 = kAddrX + 420, d5 = kAddrX + 520, d6 = kAddrX + 745, d7 = kAddrX + 805;
  header({{c1, "variant"},
          {c2, "batch"},
          {d4, "shape bytes"},
          {d5, "slot bytes"},
          {kAddrX + 580, "used"},
          {d6, "batched tensors"},
          {d7, "used"}});
  row = 0;
  for (const VariantTotal& v : vars) {
    row_bg(y, row++);
    svg.text(c1, y, variant_name(v.v), 10);
    svg.text(c2, y, std::to_string(v.batch), 10, "text-anchor=\"end\"");
    svg.text(d4, y, with_commas(v.shape), 10, "text-anchor=\"end\"");
    svg.text(d5, y, with_commas(v.slots), 10, "text-anchor=\"end\"");
    svg.text(kAddrX + 580, y, strf("%.1f%%", percent(v.shape, v.slots)), 10, "text-anchor=\"end\"");
    svg.text(d6, y, with_commas(v.batched_shape) + " / " + with_commas(v.batched_slots), 10,
             "text-anchor=\"end\"");
    svg.text(d7, y, strf("%.1f%%", percent(v.batched_shape, v.batched_slots)), 10, "text-anchor=\"end\"");
    y += 15;
  }
  y += 6;
  svg.text(
      kAddrX, y,
      "Slot bytes add every tensor's slot, so F tensors that share bytes count once each (the arena is "
      "smaller). Batched tensors: those whose first dimension is the batch (inputs, features, gradients).",
      9, "fill=\"#555555\"");
  y += 20;
  return svg.finish(y);
}

std::string memory_map_text(const CompiledModel& m) {
  const MemoryPlan& p = base_plan_of(m);
  const uint64_t end = arena_end(p);
  const uint64_t total = std::max(p.total_bytes(), end);
  std::string s = strf(
      "memory plan (train_base): %zu tensors, arena %s bytes (%s) incl. %llu-byte tail guard\n", p.size(),
      with_commas(total).c_str(), human(total).c_str(), static_cast<unsigned long long>(kTailGuardBytes));
  s += strf("%-16s %-12s %14s %10s  %s\n", "region", "offset", "bytes", "size", "tensors");
  for (int ri = 0; ri < kRegionCount; ++ri) {
    const auto r = static_cast<Region>(ri);
    const RegionSpan sp = p.region(r);
    if (sp.bytes == 0) continue;
    const std::vector<TensorId> ids = p.tensors_in(r);
    std::string extra;
    if (region_family(r) == Family::F) {  // liveness sharing: the sum of the slots against the region
      uint64_t sum = 0;
      for (TensorId id : ids) sum += p.tensor(id).slot_bytes;
      size_t lanes = 1;
      assign_lanes(p, ids, &lanes);
      if (sum > sp.bytes)
        extra = "  (slots add up to " + with_commas(sum) + " B, shared by liveness; " +
                std::to_string(lanes) + " lanes)";
    }
    s += strf("%-16s %-12s %14s %10s  %zu%s\n", region_name(r), hex(sp.offset).c_str(),
              with_commas(sp.bytes).c_str(), human(sp.bytes).c_str(), ids.size(), extra.c_str());
  }
  s += strf("%-16s %-12s %14s %10s\n", "tail guard", hex(end).c_str(), with_commas(total - end).c_str(),
            human(total - end).c_str());
  s += "\nper family:\n";
  const auto fam = family_totals(p);
  for (int f = 0; f < kFamilyCount; ++f) {
    if (fam[f].bytes == 0 && fam[f].tensors == 0) continue;
    s += strf("  %-4s %-24s %14s %10s %6.1f%%  %s in %s\n", family_name(static_cast<Family>(f)),
              kFamilyStyle[f].what, with_commas(fam[f].bytes).c_str(), human(fam[f].bytes).c_str(),
              percent(fam[f].bytes, total),
              plural(static_cast<size_t>(fam[f].tensors), "tensor", "tensors").c_str(),
              plural(static_cast<size_t>(fam[f].regions), "region", "regions").c_str());
  }
  s += strf("  %-29s %14s %10s\n", "total arena", with_commas(total).c_str(), human(total).c_str());
  s += "\nvariants: bytes the shapes use / slot bytes (all tensors; batched tensors only)\n";
  for (const VariantTotal& v : variant_totals(m))
    s += strf("  %-18s batch %6lld %9s  %14s / %14s %5.1f%%   %12s / %12s %5.1f%%\n", variant_name(v.v),
              static_cast<long long>(v.batch),
              (std::to_string(m.sample_of[static_cast<int>(v.v)].w) + "x" +
               std::to_string(m.sample_of[static_cast<int>(v.v)].h))
                  .c_str(),
              with_commas(v.shape).c_str(), with_commas(v.slots).c_str(), percent(v.shape, v.slots),
              with_commas(v.batched_shape).c_str(), with_commas(v.batched_slots).c_str(),
              percent(v.batched_shape, v.batched_slots));
  return s;
}

}  // namespace fresco
