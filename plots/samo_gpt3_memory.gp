# samo_gpt3_memory.gp: peak memory of the busiest GPU by category, dense and
# 90% sparse, each GPT-3 model at its smallest GPU count: where SAMO's
# savings come from, and what the freed memory is spent on (fewer stages
# hold more layers per GPU).
#
# Set with -e by plots/samo_figures.sh:
#   dir      the series directory: memory.csv, columns label,params,grads,
#            optimizer,activations,workspace (GiB)
#   outfile  the PNG to write
set terminal pngcairo noenhanced size 1100,600 font ",10"
set output outfile
set datafile separator comma
set datafile columnheaders
set title "Peak memory of the busiest GPU, GPT-3 on Summit at the smallest GPU count (simulated; labels: stages)" font ",12"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set ylabel "GiB"
set yrange [0:18]
set grid ytics lc rgb "#dddddd"
set key outside right top
set xtics rotate by -30
set arrow from graph 0, first 16 to graph 1, first 16 nohead dt 2 lc rgb "#444444"
set label "16 GiB" at graph 0.01, first 16.5
plot for [c = 2:6] sprintf("%s/memory.csv", dir) using c:xtic(1) title columnheader(c)
