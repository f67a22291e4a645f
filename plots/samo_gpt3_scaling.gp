# samo_gpt3_scaling.gp: GPT-3 on Summit, strong scaling with the pipeline
# strategy: step time against GPUs for dense, sparse at the dense stage count,
# and sparse with its own (fewer) stages; one panel per model, points
# labelled with the stage count G_inter; the paper's AxoNN and SAMO times as
# open points.
#
# Set with -e by plots/samo_figures.sh:
#   dir      the series directory: gpt3-MODEL-VARIANT.csv, columns gpus,step_s,stages;
#            paper-MODEL-{axonn,samo}.csv, columns gpus,step_s
#   outfile  the PNG to write
set terminal pngcairo noenhanced size 1200,900 font ",10"
set output outfile
set datafile separator comma
set datafile columnheaders
series(m, v) = sprintf("%s/%s-%s.csv", dir, m, v)
paper(m, v) = sprintf("%s/paper-%s-%s.csv", dir, m, v)
set multiplot layout 2,2 title "GPT-3 on Summit (16 GiB V100s), 1F1B, checkpointing: dense vs 90% sparse (simulated) against the paper" font ",12"
set logscale xy 2
set offsets graph 0.04, graph 0.04, 0, 0
set grid lc rgb "#dddddd"
set xlabel "GPUs"
set ylabel "step time (s)"
set key bottom left
models = "gpt3-1.3b gpt3-2.7b gpt3-6.7b gpt3-13b"
do for [m in models] {
  set title m
  plot series(m, "dense") using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "dense", \
       series(m, "dense") using 1:2:(sprintf("%d", $3)) with labels offset 0,1 tc rgb "#1f77b4" notitle, \
       series(m, "sparse-same") using 1:2 with linespoints lw 2 pt 6 dt 2 lc rgb "#ff7f0e" title "sparse, dense's stages", \
       series(m, "sparse") using 1:2 with linespoints lw 2 pt 5 lc rgb "#d62728" title "sparse, fewest stages", \
       series(m, "sparse") using 1:2:(sprintf("%d", $3)) with labels offset 0,-1 tc rgb "#d62728" notitle, \
       paper(m, "axonn") using 1:2 with points pt 6 ps 1.6 lc rgb "#1f77b4" title "paper: AxoNN", \
       paper(m, "samo") using 1:2 with points pt 4 ps 1.6 lc rgb "#d62728" title "paper: SAMO"
}
unset multiplot
