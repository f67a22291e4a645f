# goodput.gp: where a whole training run's wall time goes, from a run's
# goodput.csv (docs/GOODPUT.md, docs/FORMATS.md): one bar per part
# (productive, stragglers, checkpoint, lost, restart, repair), in hours,
# labelled with its share of the wall time.
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   datafile, outfile ('' = stdout), term, width, height, name: as in memory.gp

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

set title sprintf("%s: where the training run's wall time goes", name) font ",13"
set ylabel "hours"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.7
set grid ytics lc rgb "#dddddd"
set yrange [0:*]
set key off
plot datafile using ($2 / 3600.0):xtic(1) lc rgb "#0072B2", \
     '' using 0:($2 / 3600.0):(sprintf("%.1f %%", 100 * $3)) with labels offset 0,1 notitle
