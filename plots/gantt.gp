# gantt.gp: every op of a run as a box on its lane, one lane per (GPU,
# rank, stream), from a run's ops.csv (docs/FORMATS.md). Boxes span start to
# end; colour says what the op does. Lane 0 is at the top. With a second
# table (`stagger plot` of a validate case: predicted above, measured below)
# the two are drawn one above the other on the same time axis.
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   datafile, outfile ('' = stdout), term, width, height, name: as in memory.gp
#   dev          what the devices are called: GPU, or CPU on the host
#   datafile2, name2 (optional) the second table and its title
#   lane_size  height per lane (pixels, or lines for dumb): the height grows
#              with the number of lanes so that lane names stay legible
#   max_height the most it grows to

set datafile separator comma
set datafile columnheaders

# Classes, in legend order. COMP ops by pass; other passes (recompute,
# compress, expand) share one colour.
array class_name[7] = ["forward", "backward", "optimizer", "other compute", \
                       "collective", "send/recv", "copy"]
array colour[7] = [0x0072B2, 0xD55E00, 0x009E73, 0x56B4E9, 0xE69F00, 0xCC79A7, 0xF0E442]
class(kind, what) = kind eq "COMP" ? (what eq "fwd" ? 1 : what eq "bwd" ? 2 : \
                                      what eq "optim" ? 3 : 4) : \
                    kind eq "COMM_COLL" ? 5 : \
                    (kind eq "COMM_SEND" || kind eq "COMM_RECV") ? 6 : 7

# Tables reach millions of rows: read each file twice only. This pass finds
# the lanes, the first start and the end, and (as a side effect) which
# classes occur, as bits of `seen`, so that the key lists only those. Time
# runs from each table's first op, so that panels line up.
panels = exists("datafile2") ? 2 : 1
array files[2] = [datafile, panels == 2 ? datafile2 : ""]
array titles[2] = [name, panels == 2 ? name2 : ""]
array lanes[2]
array records[2]
array first_us[2]
seen = 0
end_ms = 0
all_lanes = 0
do for [p = 1 : panels] {
  first = 1e300
  stats files[p] using (seen = seen | 2**(class(strcol(8), strcol(9)) - 1), \
                        first = column(16) < first ? column(16) : first, column(5)):17 nooutput
  lanes[p] = STATS_max_x + 1
  records[p] = STATS_records
  first_us[p] = first
  all_lanes = all_lanes + lanes[p]
  span_ms = (STATS_max_y - first) / 1000.0
  end_ms = span_ms > end_ms ? span_ms : end_ms
}

want = 8 * lane_size * panels + lane_size * all_lanes
height = want > height ? (want < max_height ? want : max_height) : height
eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
if (panels == 2) set multiplot layout 2, 1

set xlabel "time from the first op (ms)"
set xrange [0:end_ms > 0 ? end_ms : 1]
set ytics scale 0
set grid xtics lc rgb "#dddddd"
set key outside right top Left reverse samplen 1

lane_label = 'sprintf("%s %d rank %d %s", dev, column(2), column(1), strcol(4))'
# A box: x at the middle, from start to end; y on the lane, 0.8 lanes high.
t0 = 0
mid(dummy) = (column(16) + column(17) - 2 * t0) / 2000.0
in_class(c) = class(strcol(8), strcol(9)) == c ? column(5) : NaN
do for [p = 1 : panels] {
  f = files[p]
  t0 = first_us[p]
  set title sprintf("%s: ops per %s, rank and stream", titles[p], dev) font ",13"
  set yrange [lanes[p] - 0.5 : -0.5]
  # Thin white borders separate neighbouring ops while boxes are a few
  # pixels wide on average; on a crowded Gantt they would paint everything
  # white.
  if (records[p] / lanes[p] < width / 6) {
    set style fill solid 1.0 border lc rgb "white"
  } else {
    set style fill solid 1.0 noborder
  }
  if (GPVAL_TERM eq "dumb") {
    # Text has no colours: one plot per class, each outlined in its own
    # character.
    plot f using (NaN):5:ytic(@lane_label) notitle, \
         for [c = 1 : 7] f \
           using (mid(0)):(in_class(c)):(($16 - t0) / 1000.0):(($17 - t0) / 1000.0):($5 - 0.4):($5 + 0.4) \
           with boxxyerror lt c title (seen & 2**(c - 1) ? class_name[c] : "")
  } else {
    # One pass draws every box, coloured by class, and names the lanes; the
    # key entries are drawn from nothing.
    plot for [c = 1 : 7] keyentry with boxes lc rgb sprintf("#%06X", colour[c]) \
           title (seen & 2**(c - 1) ? class_name[c] : ""), \
         f using (mid(0)):5:(($16 - t0) / 1000.0):(($17 - t0) / 1000.0):($5 - 0.4):($5 + 0.4): \
                 (colour[class(strcol(8), strcol(9))]):ytic(@lane_label) \
           with boxxyerror lc rgb variable notitle
  }
}
if (panels == 2) unset multiplot
