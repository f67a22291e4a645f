# plan.gp: the planner's objective against GPUs used (axis "gpus") or
# against the peak memory per GPU (axis "memory"), one marker per strategy,
# with the Pareto front drawn as a staircase: the best objective reachable
# with at most x GPUs (or x bytes per GPU), held to the right edge past the
# last front point. On the memory axis the cap is a dashed line.
# Configurations over the cap are grey crosses, placed by their simulated
# time. A configuration whose update is not synchronous SGD/Adam's (stale:
# delayed gradients, admitted by --allow-stale; pruned: --sparsity) has a red
# dot inside its marker. Reads plan.csv (`stagger plan --out DIR`, docs/FORMATS.md) by column
# name, so new columns do not move anything.
#
# Strategies that reach the same point (dp, burst and pipeline often do on
# one GPU) stay visible: each strategy has its own open marker, and each
# next one is smaller, so coinciding points nest inside one another; the key
# names every marker. Log axes say so in their labels.
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   outfile ('' = stdout), term, width, height
#   datafile       plan.csv
#   title          the figure's title
#   axis           "gpus" or "memory"
#   strategies     the strategies searched, separated by spaces
#   objective      time, throughput, throughput-per-gpu or gpu-hours
#   mem_cap_bytes  the cap per GPU

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

yscale = objective eq "time" ? 1000.0 : 1.0
ylab = objective eq "time" ? "step time (ms" : \
       objective eq "throughput" ? "samples/s (" : \
       objective eq "throughput-per-gpu" ? "samples/s per GPU (" : "GPU-hours ("
lower_better = objective eq "time" || objective eq "gpu-hours"
memory = axis eq "memory"
xcol = memory ? "peak_bytes" : "gpus"
frontcol = memory ? "pareto_memory" : "pareto_gpus"
# Memory in GiB, or MiB when every point is under 1 GiB.
stats datafile using (column(xcol)) nooutput
xscale = memory ? (STATS_max < 2**30 ? 2**20 : 2**30) : 1
xunit = xscale == 2**20 ? "MiB" : "GiB"
cap = real(mem_cap_bytes) / xscale

xv(dummy) = column(xcol) / xscale
yv(dummy) = column("objective") * yscale

# The front's points, apart and sorted by x (smooth unique), so the rows
# between them do not break the staircase; under a header line of their own,
# as every table here is read with column headers.
set print $front
print "x,y"
unset print
set table $front append separator comma
plot datafile using (xv(0)):(yv(0)) with table if (strcol(frontcol) eq "1")
unset table
stats datafile using (xv(0)):(yv(0)) nooutput
x_lo = STATS_min_x; x_hi = STATS_max_x; y_lo = STATS_min_y; y_hi = STATS_max_y

# Labelled ticks at 1, 2 and 5 times each power of ten in [lo_, hi_] (finer
# within a decade, each power alone past four decades), into `ticklist`,
# for log axes: gnuplot
# labels only powers of the base, so an axis spanning less than a decade
# showed one label or none.
build_ticks = 'ticklist = ""; e0 = floor(log10(lo_)); e1 = ceil(log10(hi_)); \
  steps125 = hi_ > 1e4 * lo_ ? "1" : hi_ > 10 * lo_ ? "1 2 5" : "1 1.5 2 3 4 5 6 8"; \
  do for [e = e0 : e1] { do for [m in steps125] { v = real(m) * 10.0**e; \
    if (v >= lo_ / 1.3 && v <= hi_ * 1.3) { \
      ticklist = ticklist . sprintf("%s\"%g\" %.17g", ticklist eq "" ? "" : ", ", v, v) } } }'

stats $front using 1:2 nooutput
front_last_x = STATS_records > 0 ? STATS_max_x : NaN
front_last_y = NaN
if (STATS_records > 0) { stats $front using ($1 == front_last_x ? $2 : NaN) nooutput; \
                         front_last_y = lower_better ? STATS_min : STATS_max }

set title title font ",13"
set xlabel memory ? sprintf("peak memory per GPU (%s, log scale)", xunit) : "GPUs used (log scale)"
set ylabel sprintf("%s%s; %s is better)", ylab, lower_better ? ", log scale" : "", \
                   lower_better ? "lower" : "higher")
set logscale x 2
if (memory) { lo_ = x_lo; hi_ = x_hi; eval build_ticks; \
              if (ticklist ne "") { eval "set xtics (" . ticklist . ")" } }
if (lower_better) { set logscale y; lo_ = y_lo; hi_ = y_hi; eval build_ticks; \
                    if (ticklist ne "") { eval "set ytics (" . ticklist . ")" } }
set grid xtics ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2 spacing 1.3
set autoscale fix
set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05
if (memory) {
  set arrow 1 from cap, graph 0 to cap, graph 1 nohead dt 2 lw 1.5 lc rgb "#cc0000"
  set label 1 sprintf(" cap %.0f %s", cap, xunit) at cap, graph 0.97 left tc rgb "#cc0000"
}
# The front holds from its last point to the right edge.
if (front_last_x == front_last_x) {
  set arrow 2 from front_last_x, front_last_y to graph 1, first front_last_y nohead \
      lw 2 lc rgb "#333333"
}

# Open markers, one per strategy, each next one smaller (coinciding points nest).
array marker[8] = [6, 4, 8, 12, 10, 14, 1, 3]
size(i) = 2.6 - 0.25 * ((i - 1) % 8)
ok(s) = strcol("status") eq "ok" && strcol("strategy") eq s
plot for [i = 1 : words(strategies)] datafile \
       using (ok(word(strategies, i)) ? xv(0) : NaN):(yv(0)) \
       with points pt marker[(i - 1) % 8 + 1] ps size(i) lw 1.5 title word(strategies, i), \
     datafile using (strcol("status") eq "out_of_memory" ? xv(0) : NaN):(yv(0)) \
       with points pt 2 ps 1.0 lc rgb "#999999" title "over the memory cap", \
     datafile using (strcol("status") eq "ok" && strcol("update") ne "sync" ? xv(0) : NaN):(yv(0)) \
       with points pt 7 ps 0.7 lc rgb "#cc0000" title "not synchronous SGD/Adam (stale, pruned)", \
     $front using 1:2 smooth unique with steps lw 2 lc rgb "#333333" title "Pareto front"
