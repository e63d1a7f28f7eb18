"""TopoOpt's co-optimization: jobs with a parallelization strategy (:mod:`.job`), their
traffic (:mod:`.demand`), circuits as permutations and the routes over them (:mod:`.wiring`),
the iteration-time model (:mod:`.timing`), TopologyFinder (:mod:`.finder`) and the strategy
search it alternates with (:mod:`.search`). All pure."""
