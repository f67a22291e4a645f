# plan_gpus.gp: the planner's objective against GPUs used, one colour per
# strategy, with the Pareto front (no other configuration is at least as
# good on as many GPUs or fewer) drawn as a line. Configurations over the
# memory cap are grey crosses, placed by their simulated time. Reads
# plan.csv (`stagger plan --out DIR`, docs/FORMATS.md).
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   outfile ('' = stdout), term, width, height
#   datafile     plan.csv
#   title        the figure's title
#   strategies   the strategies searched, separated by spaces
#   objective    time, throughput, throughput-per-gpu or gpu-hours

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma

yscale = objective eq "time" ? 1000.0 : 1.0
ylab = objective eq "time" ? "step time (ms)" : \
       objective eq "throughput" ? "samples/s" : \
       objective eq "throughput-per-gpu" ? "samples/s per GPU" : "GPU-hours"
lower_better = objective eq "time" || objective eq "gpu-hours"

# The front's points (column 13), kept apart and drawn sorted by x, so the
# rows between them do not break its line. The header row is not a number
# and is skipped.
set table $front separator comma
plot datafile using 4:($8 * yscale) with table if (strcol(13) eq "1")
unset table

set title title font ",13"
set xlabel "GPUs used"
set ylabel sprintf("%s (%s is better)", ylab, lower_better ? "lower" : "higher")
set logscale x 2
if (lower_better) set logscale y
set grid xtics ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2
set autoscale fix
set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05

ok(s) = strcol(3) eq "ok" && strcol(2) eq s
plot for [i = 1 : words(strategies)] datafile \
       using (ok(word(strategies, i)) ? $4 : NaN):($8 * yscale) \
       with points pt 7 ps 1.2 title word(strategies, i), \
     datafile using (strcol(3) eq "out_of_memory" ? $4 : NaN):($8 * yscale) \
       with points pt 2 ps 1.0 lc rgb "#999999" title "over the memory cap", \
     $front using 1:2 smooth unique with lines lw 2 lc rgb "#333333" title "Pareto front"
