/// What each segment's devices were served and what it cost, from `segments.csv`: per scenario,
/// allocator and segment, the means over replicates, beside the two regrets of the summary.
struct SegmentSection {
    let segments: ReportTable

    func section() throws(ReportError) -> ReportSection {
        let (scenario, allocator, segment) = (try segments.index("scenario"), try segments.index("allocator"), try segments.index("segment"))
        let (replicate, variant, best) = (try segments.index("replicate"), try segments.index("variant"), try segments.index("segment_best"))
        let (views, regret, single) = (try segments.index("views"), try segments.index("expected_regret"), try segments.index("regret_vs_best_variant"))
        var out = "<p>Devices fall into segments by their attributes, and a segment's best variant may not be the fleet's "
            + "(<code>segments.csv</code>; “Segments” in the guide). <em>Served its best</em> is the share of the segment's views that showed "
            + "its own best variant; <em>regret</em> counts each view against that variant, <em>vs best variant</em> against the best single "
            + "variant for the whole fleet: the difference is what only a policy that reads the attributes could win. Means over replicates.</p>\n"
        out += "<table class=\"headline\"><thead><tr><th>scenario</th><th>allocator</th><th>segment</th><th>best variant</th><th>views</th>"
            + "<th>served its best</th><th>regret</th><th>vs best variant</th></tr></thead><tbody>\n"
        for name in try segments.distinct("scenario") {
            let inScenario = segments.rows.filter { $0[scenario] == name }
            for label in try segments.distinct("allocator", in: inScenario) {
                let own = inScenario.filter { $0[allocator] == label }
                let replicates = Double(Set(own.map { $0[replicate] }).count)
                for group in try segments.distinct("segment", in: own) {
                    let rows = own.filter { $0[segment] == group }
                    let total = rows.map { number($0[views]) }.reduce(0, +)
                    let served = rows.filter { $0[variant] == $0[best] }.map { number($0[views]) }.reduce(0, +)
                    out += "<tr><td>\(html(name))</td><td>\(html(label))</td><td>\(html(group))</td><td>\(html(rows.first?[best] ?? ""))</td>"
                        + "<td>\(fixedPoint(total / replicates, places: 0))</td><td>\(total > 0 ? fixedPoint(100 * served / total, places: 1) + " %" : "")</td>"
                        + "<td>\(fixedPoint(rows.map { number($0[regret]) }.reduce(0, +) / replicates, places: 1))</td>"
                        + "<td>\(fixedPoint(rows.map { number($0[single]) }.reduce(0, +) / replicates, places: 1))</td></tr>\n"
                }
            }
        }
        out += "</tbody></table>\n"
        return ReportSection(title: "Segments", introduction: out)
    }
}
