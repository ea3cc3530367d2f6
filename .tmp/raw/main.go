package main

import (
	"fmt"
	"os"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"

	"github.com/graceguard/graceguard/internal/chart"
)

func main() {
	ch, err := loader.Load(chart.ChartDir())
	if err != nil {
		panic(err)
	}
	vals, err := util.ToRenderValues(ch, map[string]any{}, common.ReleaseOptions{Name: "graceguard", Namespace: "graceguard-system"}, nil)
	if err != nil {
		panic(err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		panic(err)
	}
	fmt.Print(out["graceguard/templates/"+os.Args[1]])
}
