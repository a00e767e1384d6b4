// Command callpath counts the toolgate functions one tools/call runs
// through (issue 25), from two coverage profiles of the real binary: one
// after a session's initialize and one warm call, and one after the same
// plus -calls more. A function whose block counters grew by at least
// -calls between the two runs ran on every call; background work (timers,
// health checks) does not scale with the calls and drops out.
//
// bench/callpath.sh builds the binary with -cover, drives both runs over
// streamable HTTP and calls this with the two textfmt profiles:
//
//	callpath -root . -calls 100 base.txt more.txt
//
// It prints the count per package and in all, and with -list each
// function. The count covers the whole call, request bytes in to response
// bytes out, the executor included; -skip drops packages by prefix (the
// executor's own, to count the front and the pipeline alone).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const module = "github.com/toolgate/toolgate/"

// span is a function's extent in its file.
type span struct {
	name       string
	start, end int // lines
}

func main() {
	root := flag.String("root", ".", "the toolgate checkout the binary was built from")
	calls := flag.Int64("calls", 100, "how many more calls the second profile holds")
	list := flag.Bool("list", false, "print each function")
	skip := flag.String("skip", "", "comma-separated package prefixes (module-relative) not counted")
	window := flag.String("window", "", "count from bench/toexecutor's per-call snapshots in this directory")
	flag.Parse()
	if *window != "" {
		if err := windows(*root, *window, *list, strings.Split(*skip, ",")); err != nil {
			fmt.Fprintln(os.Stderr, "callpath:", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: callpath [-root DIR] [-calls N] [-list] [-skip P,...] base.txt more.txt")
		os.Exit(2)
	}
	base, err := perFunction(*root, flag.Arg(0))
	if err == nil {
		var more map[string]int64
		if more, err = perFunction(*root, flag.Arg(1)); err == nil {
			report(base, more, *calls, *list, strings.Split(*skip, ","))
			return
		}
	}
	fmt.Fprintln(os.Stderr, "callpath:", err)
	os.Exit(1)
}

// report prints the functions whose count grew by at least calls.
func report(base, more map[string]int64, calls int64, list bool, skip []string) {
	var names []string
	for fn, n := range more {
		if n-base[fn] >= calls && !skipped(fn, skip) {
			names = append(names, fn)
		}
	}
	sort.Strings(names)
	if list {
		for _, fn := range names {
			fmt.Printf("%s\t%d\n", fn, more[fn]-base[fn])
		}
	}
	perPackage(names)
}

// windows prints the functions that ran in every call's window, and how
// many more ran in some of them only; with list only the functions, one a
// line.
func windows(root, dir string, list bool, skip []string) error {
	names, some, calls, err := ranInWindows(root, dir, skip)
	if err != nil {
		return err
	}
	if list {
		for _, fn := range names {
			fmt.Println(fn)
		}
		return nil
	}
	perPackage(names)
	fmt.Printf("(%d calls; %d more functions ran in some windows only)\n", calls, some-len(names))
	return nil
}

// ranInWindows reads dir's call-*/sent.txt and entry.txt and returns,
// sorted, the functions whose counters grew between the two in every call,
// how many grew in at least one, and how many calls there were.
func ranInWindows(root, dir string, skip []string) (every []string, some, calls int, err error) {
	dirs, err := filepath.Glob(filepath.Join(dir, "call-*"))
	if err != nil || len(dirs) == 0 {
		return nil, 0, 0, fmt.Errorf("no call-* directories in %s: run bench/toexecutor.sh", dir)
	}
	times := map[string]int{} // function -> calls it ran in
	for _, call := range dirs {
		sent, err := perFunction(root, filepath.Join(call, "sent.txt"))
		if err != nil {
			return nil, 0, 0, err
		}
		entry, err := perFunction(root, filepath.Join(call, "entry.txt"))
		if err != nil {
			return nil, 0, 0, err
		}
		for fn, n := range entry {
			if n > sent[fn] && !skipped(fn, skip) {
				times[fn]++
			}
		}
	}
	for fn, n := range times {
		if n == len(dirs) {
			every = append(every, fn)
		}
	}
	sort.Strings(every)
	return every, len(times), len(dirs), nil
}

// perPackage prints how many of names ("pkg/dir Func") each package has,
// and the total.
func perPackage(names []string) {
	perPkg := map[string]int{}
	for _, fn := range names {
		pkg, _, _ := strings.Cut(fn, " ")
		perPkg[pkg]++
	}
	pkgs := make([]string, 0, len(perPkg))
	for p := range perPkg {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		fmt.Printf("%-40s %d\n", p, perPkg[p])
	}
	fmt.Printf("%-40s %d\n", "total", len(names))
}

func skipped(fn string, skip []string) bool {
	for _, s := range skip {
		if s != "" && strings.HasPrefix(fn, s) {
			return true
		}
	}
	return false
}

// perFunction sums a textfmt profile's block counts per function, keyed
// "pkg/dir Func" (a method as "Recv.Method").
func perFunction(root, profile string) (map[string]int64, error) {
	f, err := os.Open(profile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	funcs := map[string][]span{} // by module-relative file
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") {
			continue
		}
		// file.go:l1.c1,l2.c2 stmts count
		loc, rest, ok := strings.Cut(line, ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 3 || !strings.HasPrefix(loc, module) {
			continue
		}
		count, _ := strconv.ParseInt(fields[2], 10, 64)
		startLine, _ := strconv.Atoi(fields[0][:strings.IndexByte(fields[0], '.')])
		file := strings.TrimPrefix(loc, module)
		spans, seen := funcs[file]
		if !seen {
			if spans, err = functionsOf(filepath.Join(root, file)); err != nil {
				return nil, err
			}
			funcs[file] = spans
		}
		for _, s := range spans {
			if startLine >= s.start && startLine <= s.end {
				out[filepath.Dir(file)+" "+s.name] += count
				break
			}
		}
	}
	return out, sc.Err()
}

// functionsOf lists a file's top-level functions and methods. A function
// literal counts as part of the function it is written in.
func functionsOf(path string) ([]span, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []span
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			t := fd.Recv.List[0].Type
			if st, ok := t.(*ast.StarExpr); ok {
				t = st.X
			}
			if ix, ok := t.(*ast.IndexExpr); ok {
				t = ix.X
			}
			if id, ok := t.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		out = append(out, span{name: name, start: fset.Position(fd.Pos()).Line, end: fset.Position(fd.End()).Line})
	}
	return out, nil
}
