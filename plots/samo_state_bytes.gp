# samo_state_bytes.gp: persistent model-state bytes per parameter against the
# sparsity p, dense and SAMO (strategy/sparse.h), with the break-even.
#
# Set with -e by plots/samo_figures.sh:
#   datafile  state_bytes.csv (sparsity,dense,sparse,breakeven)
#   outfile   the PNG to write
set terminal pngcairo noenhanced size 900,560 font ",11"
set output outfile
set datafile separator comma
set datafile columnheaders
stats datafile using 4 nooutput
breakeven = STATS_max
set title "Model states per parameter, mixed precision Adam: dense 16 B, SAMO 2 + 22 (1 - p) B" font ",12"
set xlabel "sparsity p (fraction of weights pruned)"
set ylabel "bytes per parameter"
set grid ytics lc rgb "#dddddd"
set key top right
set xrange [0:1]
set yrange [0:26]
set arrow from breakeven, 0 to breakeven, 26 nohead dt 2 lc rgb "#888888"
set label sprintf("sparse pays off for p > %.3f", breakeven) at breakeven + 0.02, 24 tc rgb "#555555"
plot datafile using 1:2 with lines lw 2 lc rgb "#1f77b4" title "dense (p = 0: modifier off)", \
     datafile using 1:3 with linespoints lw 2 pt 7 ps 0.6 lc rgb "#d62728" title "SAMO, sparse states"
