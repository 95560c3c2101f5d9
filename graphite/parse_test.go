package graphite

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unsafe"
)

const T = "1435077219" // a valid timestamp used throughout

type parseCase struct {
	in      string
	reason  Reason
	path    string  // when OK
	value   float64 // when OK
	ns      int64   // when OK and !now
	now     bool
	explain string // when not OK
}

func ok(in, path string, v float64, ns int64) parseCase {
	return parseCase{in: in, path: path, value: v, ns: ns}
}
func okNow(in, path string, v float64) parseCase {
	return parseCase{in: in, path: path, value: v, now: true}
}
func bad(in string, r Reason, explain string) parseCase {
	return parseCase{in: in, reason: r, explain: explain}
}

func valueErr(path, tok, what string) string {
	return fmt.Sprintf(`field "%s" value: strconv.ParseFloat: parsing %q: %s`, path, tok, what)
}
func timeErr(path, tok, what string) string {
	return fmt.Sprintf(`field "%s" time: strconv.ParseFloat: parsing %q: %s`, path, tok, what)
}

const (
	tNs      = 1435077219 * int64(time.Second)
	notFound = "received %q which doesn't have required fields"
)

// parseCases covers spec §1–§3.
var parseCases = []parseCase{
	// Shapes and tokenising.
	ok("cpu.load 11 "+T, "cpu.load", 11, tNs),
	okNow("cpu.load 11", "cpu.load", 11),
	ok("app-20261122101500-0001.3.executor.cpuTime.count 81234 1795300000",
		"app-20261122101500-0001.3.executor.cpuTime.count", 81234, 1795300000*int64(time.Second)),
	ok("app-20261122101500-0001.driver.jvm.heap.usage 0.52 1795300000",
		"app-20261122101500-0001.driver.jvm.heap.usage", 0.52, 1795300000*int64(time.Second)),
	ok("cpu\t1\t"+T, "cpu", 1, tNs),
	ok(" \t cpu  1 \v\f "+T+" \r", "cpu", 1, tNs),
	ok("cpu\u00a01\u00a0"+T, "cpu", 1, tNs),
	ok("cpu\u00851\u3000"+T, "cpu", 1, tNs),
	ok("a,b=c;d=e 1 "+T, "a,b=c;d=e", 1, tNs), // no escaping, no 1.1 tags
	ok("cpü.ß 1 "+T, "cpü.ß", 1, tNs),
	ok("a\xff\xfe 1 "+T, "a\xff\xfe", 1, tNs), // invalid UTF-8 is not space
	ok("a..b 1 "+T, "a..b", 1, tNs),
	ok("a\x00b 1 "+T, "a\x00b", 1, tNs), // control bytes that are not space
	bad("foo", ReasonFields, fmt.Sprintf(notFound, "foo")),
	bad("", ReasonFields, fmt.Sprintf(notFound, "")),
	bad(" \t ", ReasonFields, fmt.Sprintf(notFound, " \t ")),
	bad("a 1 2 3", ReasonFields, fmt.Sprintf(notFound, "a 1 2 3")),
	bad("a 1 "+T+" extra", ReasonFields, fmt.Sprintf(notFound, "a 1 "+T+" extra")),
	bad("a\u20281 2 3", ReasonFields, fmt.Sprintf(notFound, "a\u20281 2 3")), // U+2028 is space
	bad("a\u2028b 1", ReasonValue, valueErr("a", "b", "invalid syntax")),

	// Values: strconv.ParseFloat, nothing else.
	ok("a 0x1p-2 "+T, "a", 0.25, tNs),
	ok("a 0X1.8P1 "+T, "a", 3, tNs),
	ok("a 1_000 "+T, "a", 1000, tNs),
	ok("a 0x_1p0 "+T, "a", 1, tNs),
	ok("a .5 "+T, "a", 0.5, tNs),
	ok("a 5. "+T, "a", 5, tNs),
	ok("a +5 "+T, "a", 5, tNs),
	ok("a -0 "+T, "a", math.Copysign(0, -1), tNs),
	ok("a 1e3 "+T, "a", 1000, tNs),
	ok("a 1E-3 "+T, "a", 0.001, tNs),
	ok("a 1e-400 "+T, "a", 0, tNs), // underflow is not an error
	ok("a 123456789012345678901234567890 "+T, "a", 123456789012345678901234567890, tNs),
	ok("a 1.7976931348623157e308 "+T, "a", math.MaxFloat64, tNs),
	ok("a 1.7976931348623158e308 "+T, "a", math.MaxFloat64, tNs), // rounds down
	ok("a 0x1.fffffffffffffp1023 "+T, "a", math.MaxFloat64, tNs),
	ok("a 0x1.fffffffffffff7fffp1023 "+T, "a", math.MaxFloat64, tNs),
	bad("a 0x1.fffffffffffff8p1023 "+T, ReasonValue, valueErr("a", "0x1.fffffffffffff8p1023", "value out of range")),
	bad("a 1.797693134862315807937289714053034150799341327100378269361737789804449682927647509466490179775872070963302864166928879109465555478519404026306574886715058206819089020007083836762738548458177115317644757302700698555713669596228429148198608349364752927190741684443655107043427115596995080930428801779041744977920e308 "+T,
		ReasonValue, valueErr("a", "1.797693134862315807937289714053034150799341327100378269361737789804449682927647509466490179775872070963302864166928879109465555478519404026306574886715058206819089020007083836762738548458177115317644757302700698555713669596228429148198608349364752927190741684443655107043427115596995080930428801779041744977920e308", "value out of range")),
	ok("a 1.797693134862315807937289714053034150799341327100378269361737789804449682927647509466490179775872070963302864166928879109465555478519404026306574886715058206819089020007083836762738548458177115317644757302700698555713669596228429148198608349364752927190741684443655107043427115596995080930428801779041744977919999e308 "+T,
		"a", math.MaxFloat64, tNs),
	bad("a 1e400 "+T, ReasonValue, valueErr("a", "1e400", "value out of range")),
	bad("a -1e400 "+T, ReasonValue, valueErr("a", "-1e400", "value out of range")),
	bad("a 0x1p1024 "+T, ReasonValue, valueErr("a", "0x1p1024", "value out of range")),
	bad("a 0x10 "+T, ReasonValue, valueErr("a", "0x10", "invalid syntax")),
	bad("a 1,5 "+T, ReasonValue, valueErr("a", "1,5", "invalid syntax")),
	bad("a true "+T, ReasonValue, valueErr("a", "true", "invalid syntax")),
	bad("a.b x "+T, ReasonValue, valueErr("a.b", "x", "invalid syntax")),
	bad("a 1__0 "+T, ReasonValue, valueErr("a", "1__0", "invalid syntax")),
	bad("a _1 "+T, ReasonValue, valueErr("a", "_1", "invalid syntax")),
	bad("a 1_ "+T, ReasonValue, valueErr("a", "1_", "invalid syntax")),
	bad("a 1_.5 "+T, ReasonValue, valueErr("a", "1_.5", "invalid syntax")),
	bad("a 1e "+T, ReasonValue, valueErr("a", "1e", "invalid syntax")),
	bad("a . "+T, ReasonValue, valueErr("a", ".", "invalid syntax")),
	bad("a 1.2.3 "+T, ReasonValue, valueErr("a", "1.2.3", "invalid syntax")),
	bad("a 1e400x "+T, ReasonValue, valueErr("a", "1e400x", "invalid syntax")),
	bad("a +nan "+T, ReasonValue, valueErr("a", "+nan", "invalid syntax")),
	bad("a infin "+T, ReasonValue, valueErr("a", "infin", "invalid syntax")),
	bad("a nanx "+T, ReasonValue, valueErr("a", "nanx", "invalid syntax")),
	bad("a 1 x", ReasonTime, timeErr("a", "x", "invalid syntax")), // value checked first...
	bad("a x NaN", ReasonValue, valueErr("a", "x", "invalid syntax")),
	bad("a NaN x", ReasonNaN, `field "a" value: "NaN" is unsupported`), // ...and NaN before the time

	// NaN and ±Inf parse, then are refused.
	bad("a NaN "+T, ReasonNaN, `field "a" value: "NaN" is unsupported`),
	bad("a nan", ReasonNaN, `field "a" value: "NaN" is unsupported`),
	bad("a nAn "+T, ReasonNaN, `field "a" value: "NaN" is unsupported`),
	bad("a Inf "+T, ReasonInf, `field "a" value: "+Inf" is unsupported`),
	bad("a +inf "+T, ReasonInf, `field "a" value: "+Inf" is unsupported`),
	bad("a -Inf "+T, ReasonInf, `field "a" value: "-Inf" is unsupported`),
	bad("a Infinity "+T, ReasonInf, `field "a" value: "+Inf" is unsupported`),
	bad("a -INFINITY "+T, ReasonInf, `field "a" value: "-Inf" is unsupported`),

	// Timestamps.
	okNow("a 1 -1", "a", 1),
	okNow("a 1 -1.0", "a", 1),
	okNow("a 1 -1e0", "a", 1),
	okNow("a 1 -0x1p0", "a", 1),
	ok("a 1 "+T+".5", "a", 1, tNs+500000000),
	ok("a 1 "+T+".123", "a", 1, 1435077219122999906), // float rounding, as InfluxDB
	ok("a 1 -1.5", "a", 1, -500000000),               // trunc seconds, floor fraction
	ok("a 1 -0.5", "a", 1, 500000000),
	ok("a 1 0", "a", 1, 0),
	ok("a 1 1e9", "a", 1, 1e18),
	ok("a 1 1_435_077_219", "a", 1, tNs),
	ok("a 1 -2147558400", "a", 1, -2147558400*int64(time.Second)), // 1901-12-13, inclusive
	ok("a 1 2147472000", "a", 1, 2147472000*int64(time.Second)),   // 2038-01-19, inclusive
	ok("a 1 2147472000.0", "a", 1, 2147472000*int64(time.Second)),
	ok("a 1 -2147558400.5", "a", 1, -2147558399500000000),
	bad("a 1 -2147558401", ReasonTimeRange, "timestamp out of range"),
	bad("a 1 2147472001", ReasonTimeRange, "timestamp out of range"),
	bad("a 1 2147472000.5", ReasonTimeRange, "timestamp out of range"),
	bad("a 1 -2147558401.5", ReasonTimeRange, "timestamp out of range"),
	bad("a 1 1435077219000", ReasonTimeRange, "timestamp out of range"), // milliseconds
	bad("a 1 1e300", ReasonTimeRange, "timestamp out of range"),
	bad("a 1 -1e19", ReasonTimeRange, "timestamp out of range"),
	bad("a 1 NaN", ReasonTimeRange, "timestamp out of range"),
	bad("a 1 Inf", ReasonTimeRange, "timestamp out of range"),
	bad("a 1 -Infinity", ReasonTimeRange, "timestamp out of range"),
	ok("a 1 -2", "a", 1, -2*int64(time.Second)),
	bad("a 1 1e400", ReasonTime, timeErr("a", "1e400", "value out of range")),
	bad("a 1 0x10", ReasonTime, timeErr("a", "0x10", "invalid syntax")),
	bad("a 1 1,5", ReasonTime, timeErr("a", "1,5", "invalid syntax")),
}

func TestParse(t *testing.T) {
	for _, c := range parseCases {
		var l Line
		r := Parse([]byte(c.in), &l)
		if r != c.reason {
			t.Errorf("Parse(%q) = %v, want %v", c.in, r, c.reason)
			continue
		}
		if r != OK {
			err := Explain([]byte(c.in), r)
			if err == nil || err.Error() != c.explain {
				t.Errorf("Explain(%q, %v) = %v\n want %s", c.in, r, err, c.explain)
			}
			continue
		}
		if Explain([]byte(c.in), r) != nil {
			t.Errorf("Explain(%q, OK) != nil", c.in)
		}
		if string(l.Path) != c.path || math.Float64bits(l.Value) != math.Float64bits(c.value) || l.Now != c.now || (!c.now && l.Time != c.ns) {
			t.Errorf("Parse(%q) = {%q %v %d now=%v}, want {%q %v %d now=%v}",
				c.in, l.Path, l.Value, l.Time, l.Now, c.path, c.value, c.ns, c.now)
		}
		checkOracle(t, c.in)
	}
}

func TestParseAllocs(t *testing.T) {
	inputs := make([][]byte, len(parseCases))
	for i, c := range parseCases {
		inputs[i] = []byte(c.in)
	}
	var l Line
	allocs := testing.AllocsPerRun(20, func() {
		for _, in := range inputs {
			Parse(in, &l)
		}
	})
	if allocs != 0 {
		for _, in := range inputs {
			if a := testing.AllocsPerRun(5, func() { Parse(in, &l) }); a != 0 {
				t.Errorf("Parse(%q) allocates %v times", in, a)
			}
		}
	}
}

func TestReasonString(t *testing.T) {
	want := []string{"ok", "fields", "value", "nan", "inf", "timestamp", "timestamp_range"}
	for r, w := range want {
		if got := Reason(r).String(); got != w {
			t.Errorf("Reason(%d) = %q, want %q", r, got, w)
		}
	}
	if Reason(200).String() != "unknown" {
		t.Error("out-of-range Reason")
	}
	if Explain([]byte("a 1"), Reason(200)) == nil {
		t.Error("Explain with an unknown reason returned nil")
	}
	if Explain([]byte("a"), ReasonNaN) == nil {
		t.Error("Explain with a reason that does not fit the line returned nil")
	}
}

// The threshold the overflow check compares against must be 2^1024 - 2^970.
func TestOverflowDigits(t *testing.T) {
	x := new(big.Int).Lsh(big.NewInt(1), 1024)
	x.Sub(x, new(big.Int).Lsh(big.NewInt(1), 970))
	if x.String() != overflowDigits {
		t.Fatal("overflowDigits is not 2^1024-2^970")
	}
	if minUnix != time.Date(1901, 12, 13, 0, 0, 0, 0, time.UTC).Unix() ||
		maxUnix != time.Date(2038, 1, 19, 0, 0, 0, 0, time.UTC).Unix() {
		t.Fatal("range bounds are wrong")
	}
}

// oracle restates InfluxDB 1.x's Parse with strings.Fields, strconv and
// time, allocations and all: the reference the fast parser must match.
func oracle(line string) (path string, v float64, ns int64, now bool, err error) {
	f := strings.Fields(line)
	if len(f) != 2 && len(f) != 3 {
		return "", 0, 0, false, fmt.Errorf("received %q which doesn't have required fields", line)
	}
	path = f[0]
	v, perr := strconv.ParseFloat(f[1], 64)
	if perr != nil {
		return "", 0, 0, false, fmt.Errorf(`field "%s" value: %s`, path, perr)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "", 0, 0, false, fmt.Errorf(`field "%s" value: "%v" is unsupported`, path, v)
	}
	if len(f) == 2 {
		return path, v, 0, true, nil
	}
	ts, perr := strconv.ParseFloat(f[2], 64)
	if perr != nil {
		return "", 0, 0, false, fmt.Errorf(`field "%s" time: %s`, path, perr)
	}
	if ts == -1 {
		return path, v, 0, true, nil
	}
	// int64 of NaN or of a huge float is implementation-defined; on amd64
	// InfluxDB ends up rejecting all of them.
	if math.IsNaN(ts) || math.Abs(ts) > 1<<62 {
		return "", 0, 0, false, fmt.Errorf("timestamp out of range")
	}
	tm := time.Unix(int64(ts), int64((ts-math.Floor(ts))*float64(time.Second)))
	if tm.Before(time.Date(1901, 12, 13, 0, 0, 0, 0, time.UTC)) || tm.After(time.Date(2038, 1, 19, 0, 0, 0, 0, time.UTC)) {
		return "", 0, 0, false, fmt.Errorf("timestamp out of range")
	}
	return path, v, tm.UnixNano(), false, nil
}

// checkOracle compares Parse and Explain with the oracle on one line.
func checkOracle(t *testing.T, in string) {
	t.Helper()
	b := []byte(in)
	var l Line
	r := Parse(b, &l)
	path, v, ns, now, err := oracle(in)
	if (r == OK) != (err == nil) {
		t.Fatalf("Parse(%q) = %v, oracle says %v", in, r, err)
	}
	if r != OK {
		got := Explain(b, r)
		if got == nil || got.Error() != err.Error() {
			t.Fatalf("Explain(%q, %v) = %v, oracle says %v", in, r, got, err)
		}
		return
	}
	if string(l.Path) != path || math.Float64bits(l.Value) != math.Float64bits(v) || l.Now != now || (!now && l.Time != ns) {
		t.Fatalf("Parse(%q) = {%q %v %d %v}, oracle {%q %v %d %v}", in, l.Path, l.Value, l.Time, l.Now, path, v, ns, now)
	}
}

// numberTokens are hard cases for the strconv mirror: they are checked as
// values and as timestamps.
func numberTokens() []string {
	long := strings.Repeat("9", 900)
	toks := []string{
		"0", "-0", "+0", "00", "0.", ".0", "0x", "0x1", "0x1p", "0x1p+", "0x1p-", "0x.p1", "0x.8p1", "0xp1",
		"0x1P-1074", "0x1p-1075", "0x1p-2000", "0x0p99999", "0x1p1023", "0x1.fffffffffffffp1023",
		"0x1.fffffffffffff8p1023", "0x1.fffffffffffff7ffffffffp1023", "0x0.ffffffffffffffp1024",
		"0x0.fffffffffffffbffp1024", "0x0.fffffffffffffc00p1024", "0x1fffffffffffffp971", "0x3fffffffffffffp970",
		"0x3ffffffffffffep970", "0x7ffffffffffffep969", "0x_1p0", "0x1_p0", "0x1p_1", "0x1p1_0", "0_x1p0", "0b1", "0o7",
		"1_0", "1__0", "1_", "_1", "-_1", "+1_0", "1_0.0_1", "1._1", "1e1_0", "1e_1", "1e+_1", "1_e1",
		"1e308", "1e309", "1.8e308", "17976931348623158e292", "17976931348623159e292", "0.1e310", "0.01e310",
		"1e-324", "5e-324", "2e-324", "1e-99999", "1e99999", "1e100000000", "0e99999", "0.0e99999",
		"1" + strings.Repeat("0", 850) + "1e-700", "1" + strings.Repeat("0", 850) + "1e-541",
		"1" + strings.Repeat("0", 1000) + "e-692", long + "e-591", long + "e-592", long + "e-600",
		"0." + long, "." + long + "e309", "." + long + "e308",
		"1." + strings.Repeat("0", 820) + "1e308", "0." + strings.Repeat("0", 14500) + "1e15000",
		"0." + strings.Repeat("0", 10300) + "1e100000", "0x0." + strings.Repeat("0", 3000) + "1p13000",
		"0x0." + strings.Repeat("0", 2800) + "1p100000", overflowDigits[:300] + "e9", "0." + overflowDigits + "e309",
		"0." + overflowDigits[:308] + "1e309", "0." + overflowDigits[:308] + "e309", "0." + overflowDigits + "0000000001e309",
		"0000" + overflowDigits + ".", overflowDigits + "e-1", overflowDigits[:200] + "." + overflowDigits[200:],
		"inf", "INF", "iNfInItY", "infinity", "infinit", "infinityy", "+inf", "-inf", "+-inf", "nan", "NaN", "-nan", "+NaN",
		"i", "in", "n", "na", "+", "-", "e1", "p1", ".e1", "1ee1", "1e1e1", "1.5e-3", "-1", "-1.0", "-1e0", "-.1e1", "-10e-1",
		"1435077219.123", "1435077219.999999999", "-2147558400.9999999", "2147472000.0000001", "9223372036854775807",
		"-9223372036854775808", "1e18", "1e19", "-1e19", "4611686018427387904", "123456789012345", "1234567890123456",
		"-14350772", "+1435077219", "1435077a19", "143507721/", ":435077219", "14350772:9", "1435077/19", "12345678",
		"123456789012345678", "-000000000000001", "0000000000000000001", "99999999999999.9", "9999999999999999",
		"0.000000000000001", "0.0000000000000001", "12345678901234.5", "1234567890123.45", "-.5", "+.5", "5.", "-5.",
	}
	// Random junk over the characters that matter, reproducibly.
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789._eEpPxX+-abcdfABCDFinINtyTY"
	for range 20000 {
		n := 1 + rng.IntN(12)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		toks = append(toks, string(b))
	}
	return toks
}

func TestNumbersMatchOracle(t *testing.T) {
	var l Line
	for _, tok := range numberTokens() {
		checkOracle(t, "a "+tok+" "+T)
		checkOracle(t, "a 1 "+tok)
		b := []byte("a " + tok + " " + tok)
		if a := testing.AllocsPerRun(1, func() { Parse(b, &l) }); a != 0 {
			t.Fatalf("Parse(%q) allocates", b)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c.in)
	}
	for _, tok := range numberTokens()[:200] {
		f.Add("a " + tok + " " + tok)
	}
	f.Fuzz(func(t *testing.T, in string) {
		b := []byte(in)
		var l Line
		r := Parse(b, &l)
		if r != OK {
			if Explain(b, r) == nil {
				t.Fatalf("Explain(%q, %v) = nil", in, r)
			}
		} else {
			if !isSubslice(b, l.Path) || len(l.Path) == 0 {
				t.Fatalf("Path %q is not a non-empty sub-slice of %q", l.Path, in)
			}
			if bytes.ContainsFunc(l.Path, unicode.IsSpace) {
				t.Fatalf("Path %q contains white space", l.Path)
			}
			if math.IsNaN(l.Value) || math.IsInf(l.Value, 0) {
				t.Fatalf("Value %v is not finite", l.Value)
			}
		}
		// Any reason must also produce some error text without panicking.
		for reason := range Reason(8) {
			_ = Explain(b, reason)
		}
		checkOracle(t, in)
	})
}

func isSubslice(outer, inner []byte) bool {
	if len(inner) == 0 {
		return true
	}
	o := uintptr(unsafe.Pointer(unsafe.SliceData(outer)))
	i := uintptr(unsafe.Pointer(unsafe.SliceData(inner)))
	return i >= o && i+uintptr(len(inner)) <= o+uintptr(len(outer))
}

var sparkLines = [][]byte{
	[]byte("app-20261122101500-0001.3.executor.cpuTime.count 81234 1795300000"),
	[]byte("app-20261122101500-0001.driver.jvm.pools.G1-Eden-Space.used 41943040 1795300000"),
	[]byte("app-20261122101500-0001.driver.BlockManager.memory.memUsed_MB 0 1795300000"),
	[]byte("app-20261122101500-0001.12.executor.shuffleRecordsRead.count 1234567 1795300000"),
	[]byte("app-20261122101500-0001.driver.jvm.heap.usage 0.52 1795300000"),
	[]byte("app-20261122101500-0001.driver.DAGScheduler.stage.runningStages 2 1795300000"),
	[]byte("app-20261122101500-0001.7.JVMCPU.jvmCpuTime 98765432100 1795300000"),
	[]byte("app-20261122101500-0001.driver.LiveListenerBus.queue.appStatus.listenerProcessingTime.mean 0.05 1795300000"),
}

func BenchmarkParse(b *testing.B) {
	total := 0
	for _, l := range sparkLines {
		total += len(l)
	}
	b.SetBytes(int64(total / len(sparkLines)))
	b.ReportAllocs()
	var l Line
	i := 0
	for b.Loop() {
		if Parse(sparkLines[i], &l) != OK {
			b.Fatal("rejected")
		}
		i++
		if i == len(sparkLines) {
			i = 0
		}
	}
}
