-- headlab schema, migration 2 (PRAGMA user_version 1 -> 2): what every paired figure
-- carries besides n and the estimator (docs/DESIGN.md, Measurement).
--   value        the estimator's point estimate: the median of the within-pair values
--                (median_paired) or their mean (mean_se_paired; then equal to mean)
--   device       where the legs ran, from the runs' provenance (e.g. "cuda:0 NVIDIA H200",
--                "cpu (2 threads)"); several devices are joined with " | "
--   details_json {spread:{kind,lo,hi}, ratio_of_means?, control?:{arm,n,value,tolerance},
--                 contended: true|false|null, logprob_diff?:{estimator,n_pairs,n_rows,mean,
--                 lo,hi,resamples,seed,per_pair}|{unavailable}, flops:{total_ratio,
--                 attention_ratio: number|"unmeasured", reason?}}
ALTER TABLE paired_stats ADD COLUMN value REAL;
ALTER TABLE paired_stats ADD COLUMN device TEXT NOT NULL DEFAULT '';
ALTER TABLE paired_stats ADD COLUMN details_json TEXT NOT NULL DEFAULT '{}';
