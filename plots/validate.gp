# validate.gp: predicted against measured step time of every case of a
# `stagger validate` run, side by side bars, the error above each pair;
# from validate.csv (docs/FORMATS.md). Failed cases have no bars.
#
# Set with -e by `stagger plot` (sim/output/plot.c):
#   datafile, outfile ('' = stdout), term, width, height: as in memory.gp
#   title      the figure's title

eval sprintf("set terminal %s size %d,%d", term, width, height)
if (outfile ne "") set output outfile
set datafile separator comma
set datafile columnheaders
set datafile missing ""

set title title font ",13"
set ylabel "step time (ms)"
set grid ytics lc rgb "#dddddd"
set key outside right top Left reverse samplen 2
set style data histograms
set style histogram clustered gap 1
set style fill solid 1.0 border lc rgb "white"
set boxwidth 0.9
set xtics rotate by -35 left noenhanced
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0

# Columns: 1 case, 4 predicted_step_ms, 5 measured_step_ms, 6 step_error_pct.
top(p, m) = p > m ? p : m
plot datafile using 4:xtic(1) title "predicted" lc rgb "#0072B2", \
     '' using 5 title "measured" lc rgb "#D55E00", \
     '' using ($0):(top($4, $5)):(sprintf("%+.1f%%", $6)) \
        with labels offset 0, 0.8 font ",9" notitle
