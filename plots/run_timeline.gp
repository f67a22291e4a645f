# run_timeline.gp: one Monte Carlo trial of a whole training run, from a
# run's run_timeline.csv (docs/GOODPUT.md, docs/FORMATS.md): the durable
# work (hours) against the wall time (hours), rising at each checkpoint and
# falling back to it at each interruption, the interruptions marked by cause.
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   datafile, outfile ('' = stdout), term, width, height, name: as in memory.gp

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders

set title sprintf("%s: a training run's checkpoints and interruptions (one trial)", name) font ",13"
set xlabel "wall time (h)"
set ylabel "durable work (h)"
set grid lc rgb "#dddddd"
set key top left
is(c) = strcol(2) eq c ? $3 : NaN
plot datafile using 1:3 with steps lc rgb "#0072B2" title "durable work", \
     '' using 1:(is("gpu")) with points pt 7 ps 0.8 lc rgb "#D55E00" title "GPU", \
     '' using 1:(is("node")) with points pt 5 ps 0.8 lc rgb "#009E73" title "node", \
     '' using 1:(is("link")) with points pt 9 ps 0.8 lc rgb "#CC79A7" title "link", \
     '' using 1:(is("software")) with points pt 11 ps 0.8 lc rgb "#E69F00" title "software", \
     '' using 1:(is("planned")) with points pt 13 ps 0.8 lc rgb "#56B4E9" title "planned"
