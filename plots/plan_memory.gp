# plan_memory.gp: the planner's objective against the peak memory per GPU
# (log scale), one colour per strategy, with the Pareto front (no other
# configuration is at least as good with as little memory) as a line and
# the memory cap as a dashed line. Configurations over the cap are grey
# crosses. Reads plan.csv (`stagger plan --out DIR`, docs/FORMATS.md).
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   outfile ('' = stdout), term, width, height
#   datafile       plan.csv
#   title          the figure's title
#   strategies     the strategies searched, separated by spaces
#   objective      time, throughput, throughput-per-gpu or gpu-hours
#   mem_cap_bytes  the cap per GPU

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma

yscale = objective eq "time" ? 1000.0 : 1.0
ylab = objective eq "time" ? "step time (ms)" : \
       objective eq "throughput" ? "samples/s" : \
       objective eq "throughput-per-gpu" ? "samples/s per GPU" : "GPU-hours"
lower_better = objective eq "time" || objective eq "gpu-hours"
cap = real(mem_cap_bytes) / 2**30

# The front's points (column 14), drawn sorted by x (see plan_gpus.gp).
set table $front separator comma
plot datafile using ($11 / 2**30):($8 * yscale) with table if (strcol(14) eq "1")
unset table

set title title font ",13"
set xlabel "peak memory per GPU (GiB, log scale)"
set ylabel sprintf("%s (%s is better)", ylab, lower_better ? "lower" : "higher")
set logscale x 2
if (lower_better) set logscale y
set grid xtics ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2
set autoscale fix
set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05
set arrow 1 from cap, graph 0 to cap, graph 1 nohead dt 2 lw 1.5 lc rgb "#cc0000"
set label 1 sprintf(" cap %.0f GiB", cap) at cap, graph 0.97 left tc rgb "#cc0000"

ok(s) = strcol(3) eq "ok" && strcol(2) eq s
plot for [i = 1 : words(strategies)] datafile \
       using (ok(word(strategies, i)) ? $11 / 2**30 : NaN):($8 * yscale) \
       with points pt 7 ps 1.2 title word(strategies, i), \
     datafile using (strcol(3) eq "out_of_memory" ? $11 / 2**30 : NaN):($8 * yscale) \
       with points pt 2 ps 1.0 lc rgb "#999999" title "over the memory cap", \
     $front using 1:2 smooth unique with lines lw 2 lc rgb "#333333" title "Pareto front"
