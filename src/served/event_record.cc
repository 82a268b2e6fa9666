#include "served/event_record.h"

#include "core/json_write.h"
#include "data/json_cell.h"

namespace rankd {

void AppendEventRecord(const Event& e, std::string_view random_id, int64_t received_ms,
                       std::string& out) {
  out += "{\"event_id\":";
  AppendJsonString(e.event_id.empty() ? random_id : std::string_view(e.event_id), out);
  out += ",\"type\":";
  AppendJsonString(e.type->name, out);
  out += ",\"user_id\":";
  AppendJsonUserId(e.user, out);
  out += ",\"item_id\":";
  AppendJsonUserId(e.item, out);
  out += ",\"served_id\":";
  if (e.served_id.empty())
    out += "null";
  else
    AppendJsonString(e.served_id, out);
  out += ",\"value\":";
  if (e.type->value)
    AppendJsonReal(e.value, out);  // as served-log records write numbers
  else
    out += "null";
  out += ",\"ts_ms\":";
  AppendJsonInt(e.ts_ms, out);
  out += ",\"received_ms\":";
  AppendJsonInt(received_ms, out);
  out += '}';
}

}  // namespace rankd
