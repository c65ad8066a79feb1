// The app's views in menu order.
#include "app/views/view.h"

namespace kvs {

std::vector<std::unique_ptr<View>> make_views(const std::string& model_path) {
  std::vector<std::unique_ptr<View>> v;
  v.push_back(make_run_view(model_path));
  v.push_back(make_timeline_view());
  v.push_back(make_lanes_view());
  v.push_back(make_attention_view());
  v.push_back(make_heads_view());
  v.push_back(make_layers_view());
  v.push_back(make_metrics_view());
  v.push_back(make_compare_view());
  return v;
}

}  // namespace kvs
