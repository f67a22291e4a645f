# samo_dp_scaling.gp: VGG-19 and WideResNet-101 in pure data parallelism on
# Summit, Table I's global batch of 128: step time against GPUs, dense and 90%
# sparse (the all-reduce moves the compressed gradient), beside the paper's
# AxoNN and SAMO points: in fp32 (AxoNN's default, solid) and in mixed
# precision (dotted); the first-G layout (partial last node) dashed.
#
# Set with -e by plots/samo_figures.sh:
#   dir      the series directory: dp-MODEL-VARIANT.csv and paper-MODEL-{axonn,samo}.csv,
#            columns gpus,step_s
#   outfile  the PNG to write
set terminal pngcairo noenhanced size 1200,500 font ",10"
set output outfile
set datafile separator comma
set datafile columnheaders
series(m, v) = sprintf("%s/dp-%s-%s.csv", dir, m, v)
paper(m, v) = sprintf("%s/paper-%s-%s.csv", dir, m, v)
set multiplot layout 1,2 title "Pure data parallelism on Summit (AxoNN preset), global batch 128, AdamW: dense vs 90% sparse (simulated) against the paper" font ",12"
set logscale xy 2
set grid lc rgb "#dddddd"
set xlabel "GPUs"
set ylabel "step time (s)"
set xrange [12:170]
set key bottom left
set title "vgg19"
plot series("vgg19", "dense") using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "dense, fp32", \
     series("vgg19", "sparse") using 1:2 with linespoints lw 2 pt 5 lc rgb "#d62728" title "sparse, fp32", \
     series("vgg19", "dense-mixed") using 1:2 with linespoints lw 1 pt 7 dt 3 lc rgb "#1f77b4" title "dense, mixed", \
     series("vgg19", "sparse-mixed") using 1:2 with linespoints lw 1 pt 5 dt 3 lc rgb "#d62728" title "sparse, mixed", \
     series("vgg19", "dense-first") using 1:2 with linespoints lw 1 pt 1 dt 2 lc rgb "#7f7f7f" title "dense, first G GPUs", \
     paper("vgg19", "axonn") using 1:2 with points pt 6 ps 1.6 lc rgb "#1f77b4" title "paper: AxoNN", \
     paper("vgg19", "samo") using 1:2 with points pt 4 ps 1.6 lc rgb "#d62728" title "paper: SAMO"
set title "wide_resnet101_2"
plot series("wide_resnet101_2", "dense") using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "dense, fp32", \
     series("wide_resnet101_2", "sparse") using 1:2 with linespoints lw 2 pt 5 lc rgb "#d62728" title "sparse, fp32", \
     series("wide_resnet101_2", "dense-mixed") using 1:2 with linespoints lw 1 pt 7 dt 3 lc rgb "#1f77b4" title "dense, mixed", \
     series("wide_resnet101_2", "sparse-mixed") using 1:2 with linespoints lw 1 pt 5 dt 3 lc rgb "#d62728" title "sparse, mixed", \
     series("wide_resnet101_2", "dense-first") using 1:2 with linespoints lw 1 pt 1 dt 2 lc rgb "#7f7f7f" title "dense, first G GPUs", \
     paper("wide_resnet101_2", "axonn") using 1:2 with points pt 6 ps 1.6 lc rgb "#1f77b4" title "paper: AxoNN", \
     paper("wide_resnet101_2", "samo") using 1:2 with points pt 4 ps 1.6 lc rgb "#d62728" title "paper: SAMO"
unset multiplot
