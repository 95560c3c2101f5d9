package grafana

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sparkpulse/sparkpulse/schema"
)

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// provisioningFiles are the InfluxDB data sources of the compose stacks:
// 1.8, 2.x and 3.x.
var provisioningFiles = []string{"provisioning/datasources/influxdb.yaml", "provisioning-influxdb2/datasources/influxdb.yaml", "provisioning-influxdb3/datasources/influxdb.yaml"}

// The provisioning files give the data source the uid and the name the
// dashboards' data source variable selects by default, and the compose
// stack mounts the default schema's dashboards where the provider reads
// them.
func TestProvisioning(t *testing.T) {
	for _, f := range provisioningFiles {
		var ds struct {
			Datasources []struct {
				Name     string `yaml:"name"`
				UID      string `yaml:"uid"`
				Type     string `yaml:"type"`
				JSONData struct {
					DBName string `yaml:"dbName"`
				} `yaml:"jsonData"`
			} `yaml:"datasources"`
		}
		readYAML(t, f, &ds)
		if len(ds.Datasources) != 2 || ds.Datasources[0].UID != DatasourceUID || ds.Datasources[0].Name != DatasourceName || ds.Datasources[0].Type != "influxdb" ||
			ds.Datasources[0].JSONData.DBName != "spark" ||
			ds.Datasources[1].UID != HistoryDatasourceUID || ds.Datasources[1].Name != HistoryDatasourceName || ds.Datasources[1].Type != "influxdb" ||
			!strings.HasPrefix(ds.Datasources[1].JSONData.DBName, "spark") || ds.Datasources[1].JSONData.DBName == "spark" {
			t.Errorf("%s: %+v", f, ds)
		}
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "provisioning/dashboards/sparkpulse.yaml", &prov)
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	composeFile := filepath.Join("..", "docker-compose.yml")
	readYAML(t, composeFile, &compose)
	grafana := compose.Services["grafana"]
	if len(prov.Providers) != 1 {
		t.Fatalf("providers %+v", prov)
	}
	// mountedUnder returns where a volume line mounts the set of schema sc,
	// if it is under the provider's path.
	under := prov.Providers[0].Options.Path + "/"
	mountedUnder := func(volume string, sc schema.Shape) (string, bool) {
		target, ok := strings.CutPrefix(volume, "./grafana/"+Dir(sc)+":")
		target, ro := strings.CutSuffix(target, ":ro")
		return target, ok && ro && strings.HasPrefix(target, under)
	}
	// The default set is provisioned, the home dashboard its spark.json;
	// the other sets are not, and the compose file shows the line that
	// mounts each where the provider reads it.
	var defaultSet string
	for _, v := range grafana.Volumes {
		if target, ok := mountedUnder(v, schema.Default); ok {
			defaultSet = target
		}
	}
	if defaultSet == "" || !slices.Contains(grafana.Volumes, "./grafana/provisioning:/etc/grafana/provisioning:ro") ||
		grafana.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] != defaultSet+"/spark.json" {
		t.Errorf("provider %+v, grafana mounts %q, environment %v", prov, grafana.Volumes, grafana.Environment)
	}
	b, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range schema.Shapes {
		sc, _ := schema.ParseShape(name)
		if sc == schema.Default {
			continue
		}
		for _, v := range grafana.Volumes {
			if strings.Contains(v, "/"+Dir(sc)+":") {
				t.Errorf("%s mounts the %s set: %s", composeFile, sc, v)
			}
		}
		shown := false
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# - "); ok {
				_, shown = mountedUnder(v, sc)
				if shown {
					break
				}
			}
		}
		if !shown {
			t.Errorf("%s shows no line that mounts grafana/%s under %s", composeFile, Dir(sc), under)
		}
	}
}
